"""Holodesk's overlay and approval panel in a process of their own, driven by a test over pipes.

Qt's scale factor is fixed per process (QT_SCALE_FACTOR is read when the QApplication starts), and a
QApplication stays bound to the X display it opened, so every test that needs real windows on the
module's Xvfb runs this script: `OverlayProbe.start(scale=1.25)` from the test side.

Commands (JSON lines on stdin) and what the probe answers (JSON lines on stdout):
  {"cmd": "show", "step": N, "action": {...}, "editable": bool}
        -> {"event": "shown", "handles": [[x, y], ...], "click_through": [...]}
        (the targets that have a drag handle on them, none when editable is false; the X window ids
        of the marker's other windows)
  {"cmd": "clear"}                              -> {"event": "cleared"}
  {"cmd": "grab", "points": [[x, y], ...], "wrapped": bool, "changed_in_s": float}
        a worker thread grabs the desktop (through OwnWindowsHiddenCapture when wrapped; after telling a
        trailing source that the whole screen changes that many seconds from now, with changed_in_s:
        a compositor that never repaints, as far as the grab can tell) and answers
        {"event": "grabbed", "colours": [[r, g, b], ...], "visible_after": bool, "seconds": float}
        or {"event": "grab_failed", "error": str}
  {"cmd": "decide", "step": N, "action": {...}, "note": str, "thought": str, "loop_warning": str}
        a worker thread calls GuiApprover.decide(); once the panel is up:
        {"event": "panel", "widgets": {name: [x, y, w, h]}, "texts": {name: text}} (the visible ones; a
        check box's text is {"text", "checked"}; "window": the panel's rectangle, "drawn": what each
        overlay window draws, its bounding rectangle), and when decide() returns:
        {"event": "decided", "decision": str, "action": {...} | null, "panel_visible": bool}
  {"cmd": "cancel"}   cancels the pending decide() through its CancelToken
  {"cmd": "texts"}    -> {"event": "texts", "texts": {...}, "widgets": {...}} the panel's visible widgets now
  {"cmd": "quit"}
Unprompted: {"event": "target_edited", "action": {...}} when a marker was dragged.
Every geometry is in screen space (physical pixels), converted through automation.coords.

`OverlayProbe.start(wayland=True)` runs it as Holodesk runs on a Wayland session: Qt's platform is
chosen by holodesk.app.gui.qt_platform (XWayland), frames come from the backend that
holodesk.automation.backends chooses (the portal; its dialog shows on the first grab), and the
probe reports {"event": "notice", "text": ...} for the backend's explanations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

PROBE_SCRIPT = Path(__file__).resolve()
REPO_ROOT = PROBE_SCRIPT.parents[2]
Event = dict[str, Any]


class ProbeError(RuntimeError):
    """The probe did not start or did not answer in time."""


class OverlayProbe:
    """The test side: starts the probe on $DISPLAY and exchanges JSON lines with it."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self._events: list[Event] = []
        self._condition = threading.Condition()
        self._stderr: list[str] = []
        self.ready: Event = {}
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    @classmethod
    def start(
        cls,
        scale: float | None = None,
        screen_scales: str | None = None,
        timeout_s: float = 20.0,
        *,
        wayland: bool = False,
    ) -> OverlayProbe:
        """Start the probe; `scale` sets QT_SCALE_FACTOR, `screen_scales` QT_SCREEN_SCALE_FACTORS."""
        env = dict(os.environ)
        env.update(QT_QPA_PLATFORM="xcb", QT_NO_GLIB="1", PYTHONPATH=str(REPO_ROOT))
        if wayland:
            del env["QT_QPA_PLATFORM"]  # Holodesk's own choice decides
            env["HOLODESK_PROBE_WAYLAND"] = "1"
        for name in ("QT_SCALE_FACTOR", "QT_SCREEN_SCALE_FACTORS", "QT_ENABLE_HIGHDPI_SCALING"):
            env.pop(name, None)
        if scale is not None:
            env["QT_SCALE_FACTOR"] = f"{scale:g}"
        if screen_scales is not None:
            env["QT_SCREEN_SCALE_FACTORS"] = screen_scales
        process = subprocess.Popen(
            [sys.executable, str(PROBE_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            env=env,
            cwd=REPO_ROOT,
        )
        probe = cls(process)
        try:
            probe.ready = probe.wait_for("ready", timeout_s)
        except ProbeError:
            probe.close()
            raise
        return probe

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                self._stderr.append(f"stdout: {line}")
                continue
            with self._condition:
                self._events.append(event)
                self._condition.notify_all()
        with self._condition:
            self._condition.notify_all()

    def _read_stderr(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self._stderr.append(line)

    def diagnostics(self) -> str:
        status = "running" if self.process.poll() is None else f"exited with {self.process.returncode}"
        return f"overlay probe {status}; stderr:\n{''.join(self._stderr[-40:])}"

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def wait_for(
        self, name: str | tuple[str, ...], timeout_s: float = 10.0, where: Callable[[Event], bool] | None = None
    ) -> Event:
        """The first not yet taken event called `name` (or one of the names; matching `where`); it is taken."""
        names = (name,) if isinstance(name, str) else name
        deadline = time.monotonic() + timeout_s
        with self._condition:
            while True:
                for index, event in enumerate(self._events):
                    if event.get("event") in names and (where is None or where(event)):
                        return self._events.pop(index)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.process.poll() is not None:
                    raise ProbeError(f"no {name!r} event within {timeout_s:g} s; {self.diagnostics()}")
                self._condition.wait(remaining)

    def request(self, command: dict[str, Any], answer: str | tuple[str, ...], timeout_s: float = 10.0) -> Event:
        self.send(command)
        return self.wait_for(answer, timeout_s)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send({"cmd": "quit"})
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                self.process.kill()
                self.process.wait(timeout=5)


# -- the probe process ----------------------------------------------------------------------------


def emit(record: Event) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main() -> int:
    from holodesk.app.gui.gui_approver import GuiApprover
    from holodesk.app.gui.overlay import MarkerHandle, OverlayController
    from holodesk.app.gui.own_windows_capture import OwnWindowsHiddenCapture
    from holodesk.app.gui.qt import QtCore, QtWidgets, Signal
    from holodesk.app.gui.qt_screens import qt_monitors, widget_screen_rect
    from holodesk.automation.actions import action_from_dict
    from holodesk.automation.approval_rules import approval_rule
    from holodesk.automation.cancel import CancelToken
    from holodesk.automation.coords import virtual_desktop
    from holodesk.automation.engine_protocols import ApprovalRequest
    from holodesk.automation.proposal import Proposal
    from holodesk.automation.screen import ScreenCapture

    wayland = os.environ.get("HOLODESK_PROBE_WAYLAND") == "1"
    platform_reason = ""
    if wayland:
        from holodesk.app.gui.qt_platform import apply_qt_platform
        from holodesk.automation.backends import create_backends

        choice = apply_qt_platform()
        platform_reason = choice.blocker or choice.reason
        app = QtWidgets.QApplication([sys.argv[0]])
        capture = create_backends(lambda text: emit({"event": "notice", "text": text})).capture
    else:
        app = QtWidgets.QApplication([sys.argv[0], "-platform", "xcb"])
        capture = ScreenCapture()
    controller = OverlayController()
    approver = GuiApprover(controller)
    controller.target_edited.connect(lambda action: emit({"event": "target_edited", "action": action.to_dict()}))
    pending_cancel: list[CancelToken] = []

    class Commands(QtCore.QObject):
        received = Signal(object)

    commands = Commands()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip():
                commands.received.emit(json.loads(line))
        commands.received.emit({"cmd": "quit"})

    def when_exposed(widgets: Callable[[], list[QtWidgets.QWidget]], then: Callable[[], None]) -> None:
        """Run `then` once every widget is exposed and the X server has seen everything drawn."""
        shown = widgets()
        if all(w.windowHandle() is not None and w.windowHandle().isExposed() for w in shown):
            app.processEvents()
            app.sync()
            then()
            return
        QtCore.QTimer.singleShot(10, lambda: when_exposed(widgets, then))

    def on_show(command: Event) -> None:
        action = action_from_dict(command["action"])
        controller.show_proposal(command["step"], action, editable=bool(command.get("editable", True)))
        handles = [h for h in controller.windows() if isinstance(h, MarkerHandle)]
        when_exposed(
            controller.windows,
            lambda: emit(
                {
                    "event": "shown",
                    "handles": [[h.point.x, h.point.y] for h in handles],
                    # The marker's windows; the drag handles take input by design (the user drags them).
                    "click_through": [int(w.winId()) for w in controller.windows() if not isinstance(w, MarkerHandle)],
                },
            ),
        )

    def on_grab(command: Event) -> None:
        source = OwnWindowsHiddenCapture(capture, overlay=controller) if command.get("wrapped") else capture

        def work() -> None:
            started = time.monotonic()
            try:
                if "changed_in_s" in command:
                    desktop = virtual_desktop(capture.monitors())
                    capture.require_frame_after(time.monotonic() + command["changed_in_s"], [desktop])
                frame = source.grab(None)
            except Exception as exc:  # reported to the test, which decides
                emit({"event": "grab_failed", "error": f"{type(exc).__name__}: {exc}"})
                return
            seconds = time.monotonic() - started
            colours = [list(frame.pixel_rgb(x, y)) for x, y in command["points"]]
            # The restore is queued ahead of this; the GUI thread reports once it has run it.
            commands.received.emit({"cmd": "_grabbed", "colours": colours, "seconds": seconds})

        threading.Thread(target=work, daemon=True).start()

    def on_decide(command: Event) -> None:
        action = action_from_dict(command["action"])
        frame = capture.grab(None)
        proposal = Proposal(
            action, "raw", frame.width, frame.height, command.get("note", ""), command.get("thought", "")
        )
        cancel = CancelToken()
        pending_cancel[:] = [cancel]
        rule = approval_rule(action, None)  # as the engine fills a model step's request in
        request = ApprovalRequest(
            command["step"],
            "test task",
            proposal,
            action,
            frame,
            cancel,
            command.get("loop_warning", ""),
            may_approve_all=rule.may_approve_all,
            why_asked=rule.why_asked,
            irreversible=rule.irreversible,
        )

        def work() -> None:
            started = time.monotonic()
            decision = approver.decide(request)
            emit(
                {
                    "event": "decided",
                    "decision": decision.decision.value,
                    "action": decision.action.to_dict() if decision.action is not None else None,
                    "seconds": time.monotonic() - started,
                    "panel_visible": approver.panel.isVisible(),
                    "overlay_visible": bool(controller.windows()),
                }
            )

        threading.Thread(target=work, daemon=True).start()

        def report_panel() -> None:
            panel = approver.panel
            if not panel.isVisible():
                QtCore.QTimer.singleShot(10, report_panel)
                return
            when_exposed(
                lambda: [panel, *controller.windows()],
                lambda: emit(
                    {
                        "event": "panel",
                        "widgets": {
                            name: list(_rect(widget_screen_rect(w)))
                            for name, w in panel.named_widgets().items()
                            if w.isVisible()
                        },
                        "window": list(_rect(widget_screen_rect(panel))),
                        "drawn": [list(_screen_rect(rect)) for rect in controller.drawn_rects()],
                        "texts": _texts(panel.named_widgets()),
                    }
                ),
            )

        report_panel()

    def on_command(command: Event) -> None:
        name = command["cmd"]
        if name == "texts":
            app.sync()  # what the X server has delivered so far (a test's clicks) has been handled
            app.processEvents()
            named = approver.panel.named_widgets()
            rects = {n: list(_rect(widget_screen_rect(w))) for n, w in named.items() if w.isVisible()}
            emit({"event": "texts", "texts": _texts(named), "widgets": rects})
            return
        if name == "show":
            on_show(command)
        elif name == "clear":
            controller.clear()
            app.sync()
            emit({"event": "cleared"})
        elif name == "grab":
            on_grab(command)
        elif name == "decide":
            on_decide(command)
        elif name == "_grabbed":
            emit(
                {
                    "event": "grabbed",
                    "colours": command["colours"],
                    "seconds": command["seconds"],
                    "visible_after": bool(controller.windows()),
                }
            )
        elif name == "cancel":
            for token in pending_cancel:
                token.cancel()
        elif name == "quit":
            app.quit()

    commands.received.connect(on_command)
    threading.Thread(target=read_stdin, daemon=True).start()
    emit(
        {
            "event": "ready",
            "screens": [{"name": m.name, "rect": list(_rect(m.rect)), "scale": m.scale} for _, m in qt_monitors()],
            "platform": app.platformName(),
            "platform_reason": platform_reason,
        }
    )
    return app.exec()


def _texts(widgets: dict[str, Any]) -> dict[str, Any]:
    """What the visible labels say, and whether the visible check boxes are ticked."""
    from holodesk.app.gui.qt import QtWidgets

    texts: dict[str, Any] = {}
    for name, widget in widgets.items():
        if not widget.isVisible():
            continue
        if isinstance(widget, QtWidgets.QCheckBox):
            texts[name] = {"text": widget.text(), "checked": widget.isChecked()}
        elif isinstance(widget, QtWidgets.QLabel | QtWidgets.QPushButton):
            texts[name] = widget.text()
    return texts


def _screen_rect(rect: Any) -> tuple[int, int, int, int]:
    """A QRect in Qt's global logical coordinates as (left, top, width, height) in screen space."""
    from holodesk.app.gui.qt import QtCore
    from holodesk.app.gui.qt_screens import global_logical_to_screen

    start = global_logical_to_screen(QtCore.QPointF(rect.left(), rect.top()))
    end = global_logical_to_screen(QtCore.QPointF(rect.right() + 1 - 1e-3, rect.bottom() + 1 - 1e-3))
    return start.x, start.y, end.x - start.x + 1, end.y - start.y + 1


def _rect(rect: Any) -> tuple[int, int, int, int]:
    return rect.left, rect.top, rect.width, rect.height


if __name__ == "__main__":
    sys.exit(main())
