"""A routine recorded on the real target window: click OK, then type into the field.

The session's screenshots are real grabs of the window at `origin`, the actions really run through
the input performer while recording (so each screenshot shows what the user saw), and the session is
compiled and saved as the routine `NAME` under `routines`. The window is closed afterwards.
"""

from __future__ import annotations

from pathlib import Path

from bench.rigs.routine_scenes import click_step, record_session
from bench.rigs.target_client import TargetWindow
from holodesk.automation.actions import Click, TypeText
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.compiler import compile_session, save_compiled
from holodesk.automation.routines.routine_file import Routine, load_routine
from holodesk.automation.screen import ScreenCapture, ScreenFrame
from holodesk.automation.screen_change import wait_for_settle

TASK = "press OK, then write hello routine in the field"
NAME = "ok and hello"


def settled(capture: ScreenCapture) -> ScreenFrame:
    frame, _ = wait_for_settle(lambda: capture.grab(1), 3.0, 0.05)
    return frame


def record_ok_and_hello(capture: ScreenCapture, root: Path, origin: tuple[int, int] = (40, 40)) -> Routine:
    """Sessions under root/sessions, the routine under root/routines/NAME; returns it as loaded."""
    window = TargetWindow.start(*origin)
    try:
        input_performer = InputPerformer(X11Input(capture=capture))
        steps = []
        frame = capture.grab(1)
        ok = window.centre("ok")
        steps.append((frame, click_step(ok.x, ok.y, "the OK button")))
        input_performer.execute(Click(window.centre("ok")))
        field = window.centre("field")
        frame = settled(capture)  # as the engine does: the next step starts on the settled screen
        typing = {
            "action_model": {"kind": "type"},
            "action_screen": {
                "kind": "type",
                "text": "hello routine",
                "at": [field.x, field.y],
                "press_enter": False,
                "overwrite": False,
            },
            "element": "the text field",
            "decision": "approve",
            "result": {"ok": True, "detail": "typed"},
        }
        steps.append((frame, typing))
        input_performer.execute(TypeText("hello routine", at=field))
        window.sync()
        end = settled(capture)
    finally:
        window.close()
    session = record_session(root / "sessions", TASK, steps, end=end)
    folder = save_compiled(compile_session(session, NAME), root / "routines")
    return load_routine(folder)
