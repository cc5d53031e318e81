"""`holodesk mcp`'s own approval UI: the overlay and the approval panel in this process, on the GUI thread.

The MCP server runs on a worker thread (`serve`, given the desk built here); each `act` is a StepEngine
run whose approver is the tray's own GuiApprover (overlay, panel, Enter and Esc grabbed while a step
waits) and whose capture hides the overlay from every screenshot. The Qt event loop ends when the
server does (the client closed stdin, or the HTTP listener stopped).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from holodesk.app.gui.gui_approver import GuiApprover
from holodesk.app.gui.gui_thread import GuiThreadCaller
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.own_windows_capture import OwnWindowsHiddenCapture
from holodesk.app.gui.qt import QtWidgets
from holodesk.app.gui.qt_platform import apply_qt_platform
from holodesk.app.gui.quit_signals import end_on_signals
from holodesk.app.gui.routine_runs import GuiRoutineApprover
from holodesk.app.mcp.agent_task import AgentTasks, TaskSettings
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.one_step import DeskParts
from holodesk.automation.backends import create_backends
from holodesk.automation.input.x11.focus_guard import FocusGuard
from holodesk.automation.routines.windows import desktop_windows
from holodesk.inference.model_policy import ModelPolicy

log = logging.getLogger(__name__)

NO_DISPLAY = (
    "no display: holodesk mcp shows each step on your screen for you to approve, and neither DISPLAY nor"
    " WAYLAND_DISPLAY is set; start it from your desktop session, or give the host's entry an env with"
    " DISPLAY (for example DISPLAY=:0)"
)
STEP_END_WAIT_S = 5.0  # at exit, how long a stopped step may take to record its end


def run_with_panel(
    serve: Callable[[Desk], None],
    *,
    sessions: Path,
    routines: Path,
    monitor: int | None,
    auto_approve_kinds: frozenset[str],
    load_policy: Callable[[], ModelPolicy] | None = None,
    task_settings: TaskSettings | None = None,
    err: TextIO = sys.stderr,
) -> int:
    """Show approvals here while `serve(desk)` runs on its own thread; 0 when it ended cleanly, 1 if not."""
    if sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        err.write(f"holodesk mcp: {NO_DISPLAY}\n")
        return 2
    platform = apply_qt_platform()
    if platform.blocker:
        err.write(f"holodesk mcp: {platform.blocker}\n")
        return 1
    app = QtWidgets.QApplication(sys.argv[:1])
    app.setApplicationName("Holodesk")
    app.setQuitOnLastWindowClosed(False)  # the panel comes and goes; the server decides when to end
    overlay = OverlayController()
    approver = GuiApprover(overlay, auto_approve_kinds=auto_approve_kinds)
    focus_guard = FocusGuard()

    def notice(text: str) -> None:
        err.write(f"holodesk mcp: {text}\n")

    backends = create_backends(notice, focus_guard=focus_guard)
    frames = OwnWindowsHiddenCapture(backends.capture, overlay=overlay, focus_guard=focus_guard)
    routine_decider = GuiRoutineApprover(overlay, agent=approver)  # the tray's routine panel and questions
    parts = DeskParts(approver, backends.performer, frames, sessions, monitor)
    tasks = None
    if load_policy is not None and task_settings is not None:
        tasks = AgentTasks(parts, approver, load_policy, task_settings)  # the model's questions on the panel
    desk = Desk(parts, routines, windows=desktop_windows(), routine_decider=routine_decider, tasks=tasks)
    gui = GuiThreadCaller()
    failed: list[BaseException] = []

    def server_thread() -> None:
        try:
            serve(desk)
        except BaseException as exc:  # said on stderr; the process exits 1
            failed.append(exc)
        finally:
            desk.steps.stop("stopped: holodesk mcp is ending")
            gui.post(app.quit)

    threading.Thread(target=server_thread, name="holodesk-mcp-server", daemon=True).start()
    ending = _end_on_signals(app)
    try:
        app.exec()
    finally:
        # A step still with the person (or running) ends stopped, recorded, its input released, first.
        desk.steps.stop(ending[0] if ending else "stopped: holodesk mcp is ending")
        desk.steps.wait_idle(STEP_END_WAIT_S)
        backends.close()
    if failed:
        log.error("the MCP server ended with an error", exc_info=failed[0])
        err.write(f"holodesk mcp: the server ended: {type(failed[0]).__name__}: {failed[0]}\n")
        return 1
    return 0


def _end_on_signals(app: QtWidgets.QApplication) -> list[str]:
    """Ctrl+C, SIGTERM and SIGHUP end the server cleanly (the step in progress stopped, as the tray's Stop);
    the returned list gets the reason."""
    reasons: list[str] = []

    def end(name: str) -> None:
        reasons.append(f"stopped: holodesk mcp received {name}")
        app.quit()

    end_on_signals(app, end)
    return reasons
