"""A window that pastes only when the test says so: a deterministically slow (or unwilling) paste target.

`python -m tests.support.gated_paste_target X Y` maps a 320x200 window (WM_CLASS "gated-target") at
(X, Y) and prints `ready WINDOW_ID`. On each key press of v or Insert it prints `key` and waits for a
line on stdin: `paste SELECTION` asks SELECTION's owner for UTF8_STRING, as a real paste does, and
prints `got JSON_TEXT` (or `refused`, or `no answer`); `ignore` asks nothing. Only python-xlib, so
the test controls exactly when the request goes out.
"""

from __future__ import annotations

import json
import select
import sys
import time
from typing import Any

from Xlib import XK, X
from Xlib import display as xdisplay

ANSWER_TIMEOUT_S = 10.0


def _fetch(display: Any, window: Any, selection: str, when: int) -> str:
    atom = display.intern_atom(selection)
    target = display.intern_atom("UTF8_STRING")
    prop = display.intern_atom("GATED_PASTE")
    window.convert_selection(atom, target, prop, when)
    display.flush()
    deadline = time.monotonic() + ANSWER_TIMEOUT_S
    while time.monotonic() < deadline:
        if not display.pending_events():
            select.select([display.fileno()], [], [], max(0.0, deadline - time.monotonic()))
            continue
        event = display.next_event()
        if event.type == X.SelectionNotify and event.selection == atom:
            if event.property == X.NONE:
                return "refused"
            value = window.get_full_property(prop, X.AnyPropertyType)
            data = value.value if value is not None else b""
            return "got " + json.dumps(bytes(data).decode("utf-8", "replace"))
    return "no answer"


def main() -> None:
    x, y = int(sys.argv[1]), int(sys.argv[2])
    display = xdisplay.Display()
    window = display.screen().root.create_window(
        x,
        y,
        320,
        200,
        0,
        X.CopyFromParent,
        X.InputOutput,
        X.CopyFromParent,
        background_pixel=display.screen().white_pixel,
        event_mask=X.KeyPressMask | X.StructureNotifyMask | X.PropertyChangeMask,
    )
    window.set_wm_class("gated-target", "gated-target")
    window.set_wm_name("gated paste target")
    window.map()
    display.flush()
    paste_keysyms = {XK.string_to_keysym("v"), XK.string_to_keysym("V"), XK.string_to_keysym("Insert")}
    while True:
        event = display.next_event()
        if event.type == X.MapNotify:
            print(f"ready {window.id}", flush=True)
        elif event.type == X.KeyPress and display.keycode_to_keysym(event.detail, 0) in paste_keysyms:
            print("key", flush=True)
            command = sys.stdin.readline().split()
            if not command:
                return
            if command[0] == "paste":
                print(_fetch(display, window, command[1], event.time), flush=True)


if __name__ == "__main__":
    main()
