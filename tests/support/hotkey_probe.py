"""Runs holodesk.app.gui.hotkeys.HotkeyListener in its own process for the hotkey tests.

Prints "ready", then "prompt" or "stop" for each hotkey it sees. Reading "inject KEY" on stdin
notes KEY in the input performer's injected-input log, as the input performer does before pressing it; "type TEXT"
and "press KEY" make a real InputPerformer sharing that log type the text or press the key (then print
"typed" / "pressed"). argv: the prompt hotkey, then optionally the stop key (pynput syntax).
Run in a child process because pynput's X11 thread outlives `stop()` until the next key event,
which would otherwise die noisily inside the test process when its Xvfb goes away.
"""

from __future__ import annotations

import sys

from holodesk.app.gui.hotkeys import HotkeyListener
from holodesk.automation.actions import KeyCombo, TypeText
from holodesk.automation.input.injected import InjectedInput
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input


def main() -> None:
    injected = InjectedInput()
    stop_key = sys.argv[2] if len(sys.argv) > 2 else "<esc>"
    listener = HotkeyListener(
        sys.argv[1], lambda: print("prompt", flush=True), lambda: print("stop", flush=True), injected, stop_key
    )
    input_performer = InputPerformer(X11Input(monitors=(), injected=injected, type_interval_s=0.02))
    listener.start()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, key = line.strip().partition(" ")
        if command == "inject":
            injected.note([key])
            print("injected", flush=True)
        elif command == "type":
            input_performer.execute(TypeText(key))
            print("typed", flush=True)
        elif command == "press":
            input_performer.execute(KeyCombo((key,)))
            print("pressed", flush=True)


if __name__ == "__main__":
    main()
