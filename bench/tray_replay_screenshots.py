"""`python -m bench.tray_replay_screenshots OUT`: the tray app's replays and hand-over, for a person to look at.

On a private Xvfb with a window manager (openbox) and a system tray (trayer), the tray app itself
(HolodeskApp, its model a script of answers) replays a routine recorded on the logging target window
(click OK, type into the field), and these screens are saved as PNG under OUT:
    replay-step-1.png      the replay's panel on step 1, the marker on the OK button
    replay-step-2.png      the panel on step 2, typing into the field
    replay-done.png        the notice at the end: how the replay ended
    handover-asked.png     the OK button's pictures no longer match and the model could not locate it:
                           the question with "Continue with the agent"
    handover-agent.png     the agent's first step after the hand-over, on the same panel
    handover-ended.png     the notice at the end: where the replay was handed over, why, what the agent did
    stopped.png            a third replay stopped at the same question: the notice says where and why
    history.png            the History window listing both replays with how each ended
    nothing-changed.png    a fourth replay, its pictures as recorded, the field made read-only by the
                           target program: step 2 types and nothing changes, the "needs you" question
                           (answered Stop)
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from bench.rigs.screenshot_desk import pump, screenshot_desk, settle
from bench.rigs.target_client import TargetWindow
from holodesk.automation.screen import ScreenCapture

if TYPE_CHECKING:
    from holodesk.app.gui.approval_panel import ApprovalPanel

# The agent clicks the OK button (at its recorded place, in Holotron's 0-1000 space of the 1280x800
# screen: the target window starts at (40, 40)), then says it is done.
FINISHED = {"note": None, "thought": "OK is pressed", "tool_call": {"tool_name": "answer", "content": "Pressed OK."}}


def _press(panel: ApprovalPanel, name: str) -> None:
    # heavy: Qt
    from holodesk.app.gui.qt import QtWidgets

    button = panel.named_widgets()[name]
    assert isinstance(button, QtWidgets.QAbstractButton)
    button.click()


def _label(panel: ApprovalPanel, name: str) -> str:
    # heavy: Qt
    from holodesk.app.gui.qt import QtWidgets

    label = panel.named_widgets()[name]
    assert isinstance(label, QtWidgets.QLabel)
    return label.text()


def main(argv: list[str] | None = None) -> int:
    out = Path((argv or sys.argv[1:] or ["shots"])[0])
    out.mkdir(parents=True, exist_ok=True)
    with screenshot_desk(1280, 800, system_tray=True):
        _shoot(out)
    return 0


def _shoot(out: Path) -> None:
    # heavy: OpenCV; heavy: OpenCV, Qt; heavy: Qt
    from bench.rigs.window_routine import NAME, record_ok_and_hello
    from holodesk.app.common.settings import LoadedSettings, ModelSettings, SessionSettings, Settings
    from holodesk.app.gui.main import HolodeskApp, tray_icon
    from holodesk.app.gui.qt import QtCore, QtWidgets

    app = QtWidgets.QApplication(["holodesk-tray-shots"])
    capture = ScreenCapture()
    work = Path(tempfile.mkdtemp(prefix="holodesk-tray-shots-"))

    def shot(name: str) -> None:
        settle(0.8)
        capture.grab(1).to_image().save(out / name)

    try:
        record_ok_and_hello(capture, work)
        window = TargetWindow.start(40, 40)
        ok = window.centre("ok")
        click = {
            "note": None,
            "thought": "the OK button",
            "tool_call": {"tool_name": "click_desktop", "x": ok.x * 1000 // 1280, "y": ok.y * 1000 // 800},
        }
        # The model's answers in order: the second replay's locate (it answers, but with no point), then
        # the agent's click and its end, then the third replay's locate.
        script = work / "answers.jsonl"
        answers = [FINISHED, click, FINISHED, FINISHED]
        script.write_text("".join(json.dumps(json.dumps(a)) + "\n" for a in answers), encoding="utf-8")
        settings = Settings(
            model=ModelSettings(backend="scripted", profile="holotron", script=script),
            sessions=SessionSettings(folder=work / "sessions"),
        )
        holodesk = HolodeskApp(LoadedSettings(settings, work / "settings.toml"), tray_icon)
        holodesk.routines_root = work / "routines"
        holodesk.start()
        try:
            pump(lambda: holodesk.policy is not None or bool(holodesk.policy_error), 30.0)
        except TimeoutError:
            raise TimeoutError(f"the scripted model did not load: {holodesk.indicator.last_notification}") from None
        if holodesk.policy is None:
            raise RuntimeError(f"the scripted model did not load: {holodesk.policy_error}")
        settle(1.5)  # the "running" notice goes first

        panel = holodesk.routine_approver.panel

        def run_with_value(value: str, picture: str | None) -> None:
            """Start the replay from the tray; its parameter dialog (modal) is shot and answered."""

            def answer() -> None:
                dialog = QtWidgets.QApplication.activeModalWidget()
                if not isinstance(dialog, QtWidgets.QInputDialog):
                    QtCore.QTimer.singleShot(100, answer)
                    return
                dialog.setTextValue(value)
                if picture is not None:
                    shot(picture)
                dialog.accept()

            QtCore.QTimer.singleShot(100, answer)
            holodesk.run_routine(NAME)

        run_with_value("hello from the tray", "replay-value.png")
        pump(panel.isVisible)
        shot("replay-step-1.png")
        _press(panel, "approve")
        pump(lambda: panel.isVisible() and "typ" in _label(panel, "action").lower())
        shot("replay-step-2.png")
        _press(panel, "approve")
        pump(lambda: holodesk.engine is None)
        shot("replay-done.png")

        window.reset()
        routine_folder = work / "routines" / NAME
        as_recorded = work / "routine-as-recorded"
        shutil.copytree(routine_folder, as_recorded)
        for picture in routine_folder.rglob("*.png"):  # nothing looks as recorded any more
            with Image.open(picture) as old:
                size = old.size
            noise = np.random.default_rng(1).integers(0, 256, size=(size[1], size[0], 3), dtype=np.uint8)
            Image.fromarray(noise).save(picture)
        settle(4.0)  # the last notice fades
        run_with_value("hello again", None)
        pump(lambda: holodesk.routine_approver.window is not None and holodesk.routine_approver.window.isVisible())
        shot("handover-asked.png")
        question = holodesk.routine_approver.window
        assert question is not None
        (agent,) = [b for b in question.buttons() if b.text() == "Continue with the agent"]
        agent.click()
        approver = holodesk.approver.panel
        pump(lambda: approver.isVisible() or panel.isVisible())
        shot("handover-agent.png")
        shown = approver if approver.isVisible() else panel
        _press(shown, "approve")
        pump(lambda: holodesk.engine is None)
        shot("handover-ended.png")

        settle(4.0)
        run_with_value("hello a third time", None)  # the OK button is still not found: stopped at its question
        pump(lambda: holodesk.routine_approver.window is not None and holodesk.routine_approver.window.isVisible())
        question = holodesk.routine_approver.window
        assert question is not None
        (stop,) = [b for b in question.buttons() if b.text() == "Stop"]
        stop.click()
        pump(lambda: holodesk.engine is None)
        shot("stopped.png")

        holodesk.show_history()
        history = holodesk.history
        assert history is not None
        history.move(60, 40)
        history.sessions.setCurrentRow(0)
        shot("history.png")
        history.close()

        # The routine's pictures as recorded again, but the field no longer takes keys: step 2's target
        # is found and the step runs, and nothing changes where the recorded step typed.
        shutil.rmtree(routine_folder)
        shutil.copytree(as_recorded, routine_folder)
        window.reset()
        window.make_field_read_only()
        settle(4.0)
        run_with_value("no-change", None)  # no space: it would press the focused OK button
        pump(panel.isVisible)
        _press(panel, "approve")
        pump(lambda: panel.isVisible() and "typ" in _label(panel, "action").lower())
        _press(panel, "approve")
        pump(lambda: holodesk.routine_approver.window is not None and holodesk.routine_approver.window.isVisible())
        shot("nothing-changed.png")
        question = holodesk.routine_approver.window
        assert question is not None
        (stop,) = [b for b in question.buttons() if b.text() == "Stop"]
        stop.click()
        pump(lambda: holodesk.engine is None)
        # The question was true: the window received the step's keys, and its field's text never changed.
        seen = window.sync()
        keys = "".join(e["text"] for e in seen if e["event"] == "key_press")
        if "no-change" not in keys or any(e["event"] == "text" for e in seen):
            raise RuntimeError(f"step 2 was to type 'no-change' into a field that takes no keys; the window saw {seen}")
        holodesk.quit()
        window.close()
    finally:
        capture.close()
        shutil.rmtree(work, ignore_errors=True)
        del app


if __name__ == "__main__":
    sys.exit(main())
