"""Runs holodesk.app.gui.hotkeys.HotkeyListener in its own process for the hotkey tests.

Prints "ready", then "prompt" or "stop" for each hotkey it sees. Reading "inject KEY" on stdin
notes KEY in the executor's injected-input log, as the executor does before pressing it.
Run in a child process because pynput's X11 thread outlives `stop()` until the next key event,
which would otherwise die noisily inside the test process when its Xvfb goes away.
"""

from __future__ import annotations

import sys

from holodesk.app.gui.hotkeys import HotkeyListener
from holodesk.automation.executor import InjectedInput


def main() -> None:
    injected = InjectedInput()
    listener = HotkeyListener(
        sys.argv[1], lambda: print("prompt", flush=True), lambda: print("stop", flush=True), injected
    )
    listener.start()
    print("ready", flush=True)
    for line in sys.stdin:
        command, _, key = line.strip().partition(" ")
        if command == "inject":
            injected.note([key])
            print("injected", flush=True)


if __name__ == "__main__":
    main()
