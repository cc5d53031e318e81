"""`python -m bench.routine_screenshots OUT`: screenshots of routines in the tray app, for a person to look at.

On a private Xvfb with a window manager (openbox), a routine is recorded on the logging target
window (click OK, type into the field), then three screens are saved as PNG under OUT:
    save-dialog.png      History with the "Save as routine" dialog open on the recorded session
    routine-running.png  the routine replaying: the overlay's marker on the OK button, the panel asking
    repair-waiting.png   the OK button's pictures no longer match (replaced by noise), the model (a
                         stand-in pointing at the button) found it, the step ran, and the repair waits
                         for approval with the model's point marked
"""

from __future__ import annotations

import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from bench.rigs.screenshot_desk import pump, screenshot_desk, settle
from bench.rigs.target_client import TargetWindow
from holodesk.automation.actions import Point
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.routines.routine_file import load_routine
from holodesk.automation.screen import ScreenCapture, ScreenFrame


def main(argv: list[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:] or ["shots"])[0])
    out.mkdir(parents=True, exist_ok=True)
    with screenshot_desk(1600, 900):
        _shoot(out)
    return 0


def _shoot(out: Path) -> None:
    import tempfile

    # heavy: OpenCV; heavy: OpenCV, Qt; heavy: Qt
    from bench.rigs.window_routine import NAME, record_ok_and_hello
    from holodesk.app.gui.history_window import HistoryWindow
    from holodesk.app.gui.overlay import OverlayController
    from holodesk.app.gui.qt import QtWidgets
    from holodesk.app.gui.routine_runs import GuiRoutineApprover
    from holodesk.automation.routines.replay import RoutinePolicy, routine_engine

    def replay(routine: Any, approver: GuiRoutineApprover, grounder: Any = None) -> Any:
        """The routine's replay (a run of the step engine, not recorded) on a thread; returns the engine."""
        policy = RoutinePolicy(routine, {}, capture, approver, grounder=grounder)
        performer = InputPerformer(X11Input(capture=capture))
        engine = routine_engine(
            policy, approver, performer, capture, trajectory_root=None, monitor=1, agent_steps=1, questions=approver
        )
        threading.Thread(target=engine.run, args=(routine.task,), daemon=True).start()
        return engine

    app = QtWidgets.QApplication(["holodesk-screenshots"])
    capture = ScreenCapture()
    work = Path(tempfile.mkdtemp(prefix="holodesk-shots-"))
    try:
        record_ok_and_hello(capture, work)

        history = HistoryWindow(work / "sessions", work / "routines-new")
        history.move(60, 40)
        history.show()
        history.sessions.setCurrentRow(0)
        dialog = history.open_save_dialog()
        assert dialog is not None
        pump(dialog.isVisible)
        settle(0.6)
        capture.grab(1).to_image().save(out / "save-dialog.png")
        dialog.reject()
        history.close()

        window = TargetWindow.start(40, 40)
        approver = GuiRoutineApprover(OverlayController())
        routine = load_routine(work / "routines" / NAME)
        runner = replay(routine, approver)
        pump(approver.panel.isVisible)
        settle(0.6)
        capture.grab(1).to_image().save(out / "routine-running.png")
        runner.stop()
        pump(lambda: not approver.panel.isVisible())

        folder = work / "routines" / NAME
        target = routine.steps[0].target
        assert target is not None
        for relative in (target.crop, target.context):  # the button no longer looks as recorded
            with Image.open(folder / relative) as old:
                size = old.size
            noise = np.random.default_rng(1).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(noise).save(folder / relative)
        ok = window.centre("ok")

        class PointingModel:
            def locate(self, frame: ScreenFrame, description: str) -> Point:
                return ok

        approver = GuiRoutineApprover(OverlayController())
        runner = replay(load_routine(folder), approver, PointingModel())
        pump(approver.panel.isVisible)
        settle(0.6)
        capture.grab(1).to_image().save(out / "model-step-asked.png")
        approver.panel.named_widgets()["approve"].click()
        pump(lambda: approver.window is not None and approver.window.isVisible())
        settle(0.6)
        capture.grab(1).to_image().save(out / "repair-waiting.png")
        window_box = approver.window
        assert window_box is not None
        details = [b for b in window_box.buttons() if b.text().startswith("Show Details")]
        if details:
            details[0].click()
            settle(0.6)
            capture.grab(1).to_image().save(out / "repair-waiting-details.png")
        runner.stop()
        settle(0.6)
        window.close()
    finally:
        capture.close()
        shutil.rmtree(work, ignore_errors=True)
        del app


if __name__ == "__main__":
    sys.exit(main())
