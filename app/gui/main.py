"""The tray application: settings, single instance, hotkeys, task prompt, overlay, approval, engine.

Threads: everything with widgets lives on the GUI thread. The model loads on a worker thread and
each task runs on the engine's thread; both talk back through `EngineBridge` signals (queued onto
the GUI thread). The engine reaches the GUI itself only through the approver and the overlay-aware
capture, which switch threads on their own.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import sys
import threading
from collections.abc import Callable

from holodesk.app.common.backend_problems import (
    gpu_missing,
    in_words,
    load_failure_in_words,
    preflight,
    run_end_hint,
)
from holodesk.app.common.hotkey_path import TRIGGER_ADVICE, is_wayland_session
from holodesk.app.common.instance_client import InstanceError, display_in_words
from holodesk.app.common.overrides import CommandFlags, FlagError, apply_flags
from holodesk.app.common.policy_factory import PolicyConfigError, build_policy, plain_http_key_warning
from holodesk.app.common.resources import icon_path
from holodesk.app.common.routine_hotkeys import RoutineHotkeys, plan_routine_hotkeys, readable_routines
from holodesk.app.common.session_words import hotkey_in_words
from holodesk.app.common.settings import LoadedSettings, Settings, load_settings
from holodesk.app.gui.app_state import AppState, StatusLine, from_engine
from holodesk.app.gui.first_run import Choice, FirstRunWindow, measured_choices
from holodesk.app.gui.gui_approver import GuiApprover, answer_keys_grabbed
from holodesk.app.gui.history_window import HistoryWindow
from holodesk.app.gui.hotkeys import (
    HotkeyError,
    HotkeyListener,
    HotkeySignals,
    OwnWindowsStopKey,
    action_presses,
    stop_key_name,
)
from holodesk.app.gui.key_grab import KeyGrab, stop_keysym
from holodesk.app.gui.loading_window import LoadingWindow
from holodesk.app.gui.overlay import OverlayController
from holodesk.app.gui.own_windows_capture import OwnWindowsHiddenCapture
from holodesk.app.gui.parameter_dialog import ask_parameter
from holodesk.app.gui.portal_hotkeys import PortalHotkeys, shortcut_requests
from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets, Signal
from holodesk.app.gui.qt_platform import apply_qt_platform
from holodesk.app.gui.quit_signals import end_on_signals
from holodesk.app.gui.recent_tasks import RecentTasks, default_path
from holodesk.app.gui.routine_runs import GuiRoutineApprover, fill_routines_menu, open_in_file_manager
from holodesk.app.gui.settings_dialog import SettingsDialog
from holodesk.app.gui.single_instance import InstanceServer, acquire_instance
from holodesk.app.gui.task_prompt import TaskPrompt
from holodesk.app.gui.thinking_status import ThinkingStatus
from holodesk.app.gui.tray import Indicator, make_indicator
from holodesk.app.mcp.agent_task import AgentTasks, PolicyUnavailable, TaskSettings
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.desk_turn import DeskTurn
from holodesk.app.mcp.one_step import DeskParts, StepRunner
from holodesk.app.mcp.tray_clients import TrayClients
from holodesk.app.setup.first_start import first_run_needed
from holodesk.automation.actions import Action
from holodesk.automation.backends import BackendSettingError, choose_backend, create_backends
from holodesk.automation.engine import StepEngine
from holodesk.automation.engine_protocols import EngineEvent, EngineSettings, EngineState, Outcome, RunResult
from holodesk.automation.held_input import release_leftover_input
from holodesk.automation.input.x11.focus_guard import FocusGuard
from holodesk.automation.routines.grounding import ModelGrounder
from holodesk.automation.routines.replay import (
    HandOver,
    ParameterError,
    RoutinePolicy,
    routine_engine,
    task_with_values,
)
from holodesk.automation.routines.routine_file import RoutineFileError, default_routines_root, load_routine
from holodesk.automation.routines.windows import desktop_windows
from holodesk.automation.trajectory import TrajectoryWriteError, check_writable, prune_sessions
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

log = logging.getLogger(__name__)


def steps_in_words(count: int) -> str:
    if count == 0:
        return "no step taken"
    return f"{count} step{'s' if count != 1 else ''} taken"


OUTCOME_TITLES = {
    Outcome.DONE: "Task finished",
    Outcome.ASK_USER: "Holodesk needs you",
    Outcome.STEP_LIMIT: "Step limit reached",
    Outcome.STOPPED: "Stopped",
    Outcome.ERROR: "Task failed",
    Outcome.FAILED: "An action failed",
}


class EngineBridge(QtCore.QObject):
    """Signals emitted from worker threads, delivered on the GUI thread."""

    engine_event = Signal(object)  # EngineEvent
    policy_ready = Signal(object)  # ModelPolicy
    policy_failed = Signal(str)
    load_progress = Signal(float, str)
    no_gpu = Signal()  # the local backend failed on a computer without a usable GPU
    backend_notice = Signal(str)  # the Wayland portal's consent explanations


# Where the stop key is grabbed (X11): the model thinks, the screen settles, an approved action runs.
# Not while the panel asks (it grabs the key itself), a question waits for a typed reply, or a pause.
STOP_KEY_STATES = frozenset(
    {
        EngineState.CAPTURING,
        EngineState.THINKING,
        EngineState.SAVING,
        EngineState.ACTING,
        EngineState.SETTLING,
        EngineState.NO_VISIBLE_CHANGE,
        EngineState.STEP_FAILED,
    }
)
# Where one step's action is over or not yet chosen: what that action pressed matters no more.
STEP_BOUNDARIES = frozenset({EngineState.CAPTURING, EngineState.THINKING, EngineState.SETTLING})
TRAY_RUN = "a task or routine started in the tray"  # who holds the desktop's turn, in an MCP client's error
STOPPED_IN_TRAY = "stopped: the person chose Stop in the Holodesk tray"
ENGINE_END_WAIT_S = 10.0  # at quit, for the task's run to record its stop and release its input


class HolodeskApp(QtCore.QObject):
    """Owns every window and the current run. Create and use on the GUI thread."""

    choices_measured = Signal(object)  # the first-run window's choices (list[Choice]) or why not (str), from a thread

    def __init__(
        self,
        loaded: LoadedSettings,
        icon_for: Callable[[AppState], QtGui.QIcon],
        server: InstanceServer | None = None,
        *,
        first_run: bool = False,
    ) -> None:
        super().__init__()
        self.first_run = first_run  # no model chosen yet and the default cannot run: the first-run window
        self.first_run_window: FirstRunWindow | None = None
        self.no_model_chosen = False  # the first-run window closed without a choice: no model is loaded
        self.measuring_choices = False
        self.choices_measured.connect(self._on_choices_measured)
        self.settings: Settings = loaded.settings
        self.settings_path = loaded.path
        self.settings_problem = loaded.problem
        self.bridge = EngineBridge()
        self.indicator: Indicator = make_indicator(icon_for)
        self.overlay = OverlayController()
        self.approver = GuiApprover(self.overlay, auto_approve_kinds=self.settings.approval.auto_approve)
        self.thinking = ThinkingStatus()
        self.loading = LoadingWindow()
        # One capture serves both (X11: mss handles are per thread already; Wayland: one portal
        # session), chosen for this session by holodesk.automation.backends. Keys of an action go to
        # the window the user had at the screenshot, never to ours. Neither the overlay nor the
        # thinking status may be in a screenshot the model sees.
        focus_guard = FocusGuard()
        self.backends = create_backends(self.bridge.backend_notice.emit, focus_guard=focus_guard)
        self.performer = self.backends.performer
        self.frames = OwnWindowsHiddenCapture(
            self.backends.capture,
            overlay=self.overlay,
            status=self.thinking,
            also_hidden=self.indicator.screen_windows,
            focus_guard=focus_guard,
            own_regions=self.indicator.own_regions,
        )
        self.prompt = TaskPrompt(RecentTasks(default_path()))
        self.hotkey_signals = HotkeySignals()
        self.hotkeys: HotkeyListener | None = None
        self.portal_hotkeys: PortalHotkeys | None = None
        self.own_windows_stop: OwnWindowsStopKey | None = None
        self.hotkey_notices_given: set[str] = set()  # each hotkey notice is given once per app run
        self._stop_key_grab: KeyGrab | None = None  # the stop key, held while the model thinks and acts
        self._action_presses_stop_key = False  # the approved action presses the stop key: not grabbed for it
        self.policy: ModelPolicy | None = None
        self.policy_error: str | None = None
        self._engine_thread: threading.Thread | None = None  # the task's run, joined (bounded) at quit
        self.engine: StepEngine | None = None
        self.pending_task: str | None = None
        # Model settings saved while a task runs: the running task keeps its model; the new one loads after.
        self.reload_after_run = False
        self.history: HistoryWindow | None = None
        self.routines_root = default_routines_root()
        self.routine_approver = GuiRoutineApprover(self.overlay, agent=self.approver)
        self.routine_approver.question_shown = self.thinking.hide_status  # it waits for the person now
        for approver in (self.approver, self.routine_approver.steps):
            approver.before_action = self._before_action
        self.routine_policy: RoutinePolicy | None = None  # the routine the running engine replays
        self.last_routine: RoutinePolicy | None = None
        self.routine_hotkeys = RoutineHotkeys()  # what the running hotkey listener binds
        self.settings_dialog: SettingsDialog | None = None
        self.server = server
        # One run at a time on this desktop: the tray's own tasks and routines, and its MCP clients' steps.
        self.turn = DeskTurn()
        self._holds_turn = False
        self.mcp_clients = TrayClients(self._mcp_desk, lambda words: self.bridge.backend_notice.emit(words))

        self.indicator.new_task.connect(self.open_prompt)
        self.indicator.stop.connect(self.stop)
        self.thinking.stop_requested.connect(self.stop)
        self.indicator.pause_toggled.connect(self.toggle_pause)
        self.indicator.show_history.connect(self.show_history)
        self.indicator.show_settings.connect(self.show_settings)
        self.indicator.choose_model.connect(self.open_first_run)
        self.indicator.quit.connect(lambda: self.quit())
        self.indicator.routines_menu.aboutToShow.connect(self._fill_routines_menu)
        self.prompt.submitted.connect(self.start_task)
        # Enter typed into the prompt is the prompt's, even while a step waits for its approval.
        self.prompt.shown_changed.connect(self.approver.set_keys_suspended)
        self.approver.auto_approved.connect(self._on_auto_approved)
        self.hotkey_signals.prompt_requested.connect(self.open_prompt)
        self.hotkey_signals.stop_requested.connect(self.stop)
        self.hotkey_signals.routine_requested.connect(self.run_routine)
        self.bridge.engine_event.connect(self._on_engine_event)
        self.bridge.policy_ready.connect(self._on_policy_ready)
        self.bridge.policy_failed.connect(self._on_policy_failed)
        self.bridge.load_progress.connect(self._on_load_progress)
        self.bridge.no_gpu.connect(self._on_no_gpu)
        self.no_gpu_here = False
        self.bridge.backend_notice.connect(lambda text: self._notify("Holodesk", text))
        if server is not None:
            server.message_received.connect(self.on_instance_message)
            # Another install's `holodesk` (another protocol version): the tray says why it did nothing.
            server.refused.connect(lambda words: self._notify("Holodesk did nothing", words))
            server.mcp_connected.connect(self._on_mcp_connected)

    # -- start-up ------------------------------------------------------------------------------

    def start(self) -> None:
        # First, at once: the person who started Holodesk from a menu sees it is there and how to use it.
        hotkey = hotkey_in_words(self.settings.hotkeys.prompt)
        self._notify("Holodesk is running", f"Open a task from the tray icon, or press {hotkey}.")
        if self.settings_problem is not None:
            # Said on stderr too, and kept in the menu until the user opens the settings and saves.
            problem = self.settings_problem
            words = "\n".join(problem.problems) + "\nEach of these uses its default; the file's other values are used."
            print(f"holodesk: settings problems in {problem.path}:\n{words}", file=sys.stderr, flush=True)
            self.indicator.show_settings_problem(words)
        leftover = release_leftover_input()  # a button or key a killed run left pressed
        if leftover.markers:
            self._notify("Released stuck input", leftover.describe())
        self._start_hotkeys()
        if self.first_run:
            self.open_first_run()  # not the default model, which cannot run here: a red icon and a failed task
        else:
            self._load_policy()

    def open_first_run(self) -> None:
        """The first-run window (a model that fits this computer, or a server elsewhere); raised if open.

        Its step times are measured first, off the GUI thread (about 3 s here: the tray stays responsive)."""
        if self.first_run_window is not None:
            self._show_first_run(self.first_run_window)
            return
        if self.measuring_choices:
            return  # the window opens when the measurement ends
        self.measuring_choices = True
        self._show(StatusLine(AppState.ASKING, "choose a model: measuring this computer's speed first"))

        def measure() -> None:
            try:
                self.choices_measured.emit(measured_choices())
            except Exception as exc:  # a fault measuring must still reach the person, not leave them waiting
                log.exception("measuring the first-run choices failed")
                self.choices_measured.emit(f"{type(exc).__name__}: {exc}")

        threading.Thread(target=measure, name="holodesk-measure", daemon=True).start()

    def _on_choices_measured(self, choices: list[Choice] | str) -> None:
        self.measuring_choices = False
        if isinstance(choices, str):
            self.no_model_chosen = True
            words = (
                f"The model choice could not be shown ({choices}). {NO_MODEL_WORDS.format(settings=self.settings_path)}"
            )
            self._show(StatusLine(AppState.ERROR, "no model chosen yet"))
            self.indicator.show_model_problem("⚠ No model yet: choose one", words, opens_choice=True)
            self._notify("No model chosen", words)
            return
        window = FirstRunWindow(choices, current_profile=self.settings.model.profile)
        window.finished_setup.connect(self._on_first_run_setup)
        window.finished.connect(self._on_first_run_closed)
        self.first_run_window = window
        self._show(StatusLine(AppState.ASKING, "choose a model in the first-run window"))
        self._show_first_run(window)

    def _show_first_run(self, window: FirstRunWindow) -> None:
        window.show()
        window.raise_()
        window.activateWindow()

    def _on_first_run_setup(self, ok: bool) -> None:
        """A choice was saved (by the `holodesk setup` child, or the window for a server): load it now."""
        if not ok:
            return
        self.no_model_chosen = False
        self.first_run = False
        settings = load_settings(self.settings_path).settings
        unchanged = settings.model == self.settings.model
        self.apply_settings(settings)  # loads the new model when it changed and no task runs
        if unchanged and self.policy is None and self.engine is None:
            self._load_policy()  # the same model as the defaults (chosen anyway): still load it

    def _on_first_run_closed(self, _result: int) -> None:
        window, self.first_run_window = self.first_run_window, None
        if window is not None:
            window.deleteLater()
        if window is None or window.chosen or self.policy is not None:
            return
        if load_settings(self.settings_path).settings.model != self.settings.model:
            # Closed in the moment between the download's `holodesk setup` saving its choice (atomically,
            # as its last act) and its exit: the choice is made, and the settings file says so.
            self._on_first_run_setup(True)
            return
        self.no_model_chosen = True
        words = NO_MODEL_WORDS.format(settings=self.settings_path)
        self._show(StatusLine(AppState.ERROR, "no model chosen yet: Choose a model… in this menu"))
        self.indicator.show_model_problem("⚠ No model yet: choose one", words, opens_choice=True)
        self._notify("No model chosen", words)

    def _start_hotkeys(self) -> None:
        """Global keys by the path this session allows (holodesk.app.common.hotkey_path): pynput, or on
        Wayland the desktop portal, else a desktop shortcut running `holodesk trigger` (the user is
        told how to set it up)."""
        self._stop_hotkeys()
        keys = self.settings.hotkeys
        for approver in (self.approver, self.routine_approver.steps):
            approver.stop_gesture_s = keys.stop.within_s  # how long the panel's keys stay ours after a stop
        self.routine_hotkeys = self._plan_routine_hotkeys()
        if is_wayland_session():
            # Nothing global hears Holodesk's own windows here: the stop gesture is caught inside them.
            self.own_windows_stop = OwnWindowsStopKey(
                keys.stop.key, keys.stop.presses, keys.stop.within_s, self.performer.injected, self
            )
            self.own_windows_stop.triggered.connect(self.stop)
            app = QtWidgets.QApplication.instance()
            if app is not None:
                app.installEventFilter(self.own_windows_stop)
            # The portal is asked off the GUI thread; without GlobalShortcuts the notice says how
            # to bind `holodesk trigger` instead.
            self.portal_hotkeys = PortalHotkeys(parent=self)
            self.portal_hotkeys.prompt_requested.connect(self.open_prompt)
            self.portal_hotkeys.stop_requested.connect(self.stop)
            self.portal_hotkeys.routine_requested.connect(self.run_routine)
            self.portal_hotkeys.notice.connect(self._hotkey_notice)
            self.portal_hotkeys.start(
                shortcut_requests(keys.prompt, keys.stop.key, keys.stop.presses, self.routine_hotkeys.bound)
            )
            return
        listener = self.hotkey_signals.listener(
            keys.prompt,
            self.performer.injected,
            self.routine_hotkeys.bound,
            stop_key=keys.stop.key,
            stop_presses=keys.stop.presses,
            stop_window_s=keys.stop.within_s,
        )
        try:
            listener.start()
        except HotkeyError as exc:
            self._hotkey_notice("Global hotkeys unavailable", f"{exc}. To use the keyboard, {TRIGGER_ADVICE}.")
            return
        self.hotkeys = listener

    def _plan_routine_hotkeys(self) -> RoutineHotkeys:
        """The saved routines' hotkeys as they may be bound now; each refusal told once per app run."""
        keys = self.settings.hotkeys
        plan = plan_routine_hotkeys(readable_routines(self.routines_root), keys.prompt, keys.stop.key)
        for name, why in plan.refused.items():
            self._hotkey_notice("Routine hotkey not bound", f"The routine {name!r} has no hotkey: {why}.")
        return plan

    def _fill_routines_menu(self) -> None:
        """The Routines menu, read afresh; a routine hotkey added, changed or removed by hand is bound now."""
        if self._plan_routine_hotkeys() != self.routine_hotkeys:
            self._start_hotkeys()
        fill_routines_menu(
            self.indicator.routines_menu,
            self.routines_root,
            self.run_routine,
            open_in_file_manager,
            self.routine_hotkeys,
            through_desktop=self.portal_hotkeys is not None,
        )

    def _stop_hotkeys(self) -> None:
        if self.hotkeys is not None:
            self.hotkeys.stop()
            self.hotkeys = None
        if self.portal_hotkeys is not None:
            self.portal_hotkeys.stop()
            self.portal_hotkeys = None
        if self.own_windows_stop is not None:
            app = QtWidgets.QApplication.instance()
            if app is not None:
                app.removeEventFilter(self.own_windows_stop)
            self.own_windows_stop = None

    def _hotkey_notice(self, title: str, text: str) -> None:
        """Say how the keys reach Holodesk, once per app run (also on stderr, for a terminal start)."""
        if text in self.hotkey_notices_given:
            return
        self.hotkey_notices_given.add(text)
        self._notify(title, text)

    def _load_policy(self) -> None:
        """Build the policy on a worker thread (loading a 12B model takes a while)."""
        self.policy = None
        self.policy_error = None
        options = self.settings.to_policy_options()
        where = "asking the model server" if options.backend == "remote" else f"{options.backend} backend"
        self._show(StatusLine(AppState.LOADING, f"{where}, {options.profile} profile", 0.0))
        self.loading.show_progress(0.0, where, title=self._waiting_words()[0])
        warning = plain_http_key_warning(options)
        if warning:
            self._notify("API key sent unencrypted", warning)

        def work() -> None:
            try:
                policy = build_policy(
                    options, lambda fraction, message: self.bridge.load_progress.emit(fraction, message)
                )
                problem = preflight(policy.backend, policy.profile.name)  # asked once, before any task
            except PolicyConfigError as exc:
                self.bridge.policy_failed.emit(f"configuration: {exc}")
            except InferenceError as exc:  # no weights, no GPU memory, server down: expected, said plainly
                # Not on stderr as it is: the balloon's words (also on stderr) may advise otherwise (no GPU).
                log.info("the model is not available: %s", exc)
                if options.backend == "local" and gpu_missing():
                    self.bridge.no_gpu.emit()
                self.bridge.policy_failed.emit(in_words(exc, options.profile))
            except Exception as exc:  # the model could not be loaded: say why, keep the app running
                log.exception("policy failed to load")
                self.bridge.policy_failed.emit(str(exc))
            else:
                if problem is not None:
                    log.warning("the model server cannot serve: %s", problem)
                    self.bridge.policy_failed.emit(problem)
                else:
                    self.bridge.policy_ready.emit(policy)

        threading.Thread(target=work, name="holodesk-load", daemon=True).start()

    def _on_load_progress(self, fraction: float, message: str) -> None:
        if self.policy is None:
            self._show(StatusLine(AppState.LOADING, message, fraction))
            self.loading.show_progress(fraction, message, title=self._waiting_words()[0])

    def _on_policy_ready(self, policy: ModelPolicy) -> None:
        self.policy = policy
        self.loading.hide()
        self.indicator.show_model_problem(None)
        self._show(StatusLine(AppState.IDLE, f"{policy.profile.name} profile ready"))
        if self.pending_task:
            task, self.pending_task = self.pending_task, None
            self.start_task(task)

    def _on_no_gpu(self) -> None:
        self.no_gpu_here = True  # queued before policy_failed: its balloon offers the server instead

    def _on_policy_failed(self, reason: str) -> None:
        self.policy_error = reason
        self.loading.hide()
        words = self._load_failure_words(reason)
        # The tooltip, the menu's first line and the balloon give the same advice (not the raw reason's,
        # which may say to install a GPU extra on a computer without a GPU).
        self._show(StatusLine(AppState.ERROR, f"the model is not available: {words}"))
        self.indicator.show_model_problem(model_problem_line(self.settings.model.backend, self.no_gpu_here), words)
        if self.pending_task:
            self.pending_task = None
            self._notify("Task not started", words)
            return
        self._notify("Model not available", words)

    def _waiting_words(self) -> tuple[str, str]:
        """What the app is waiting for before a task can start: nothing loads for a remote backend."""
        if self.settings.model.backend == "remote":
            return "Asking the model server", "The task starts as soon as the server answers."
        return "Loading the model", "The task starts as soon as the model is ready."

    def _load_failure_words(self, reason: str) -> str:
        return load_failure_in_words(reason, self.settings.model.backend, no_gpu=self.no_gpu_here)

    # -- commands ------------------------------------------------------------------------------

    def on_instance_message(self, message: str) -> None:
        if message == "prompt":
            self.open_prompt()
        elif message == "stop":
            self.stop()
        elif message == "show":
            hotkey = hotkey_in_words(self.settings.hotkeys.prompt)
            self._notify("Holodesk is running", f"Open a task from the tray, or press {hotkey}.")

    def open_prompt(self) -> None:
        self.prompt.open_near()

    def start_task(self, task: str) -> None:
        if self.engine is not None:
            self._notify(
                "A task is running",
                f"“{_shortened(task)}” was not started: stop the running task first (Esc twice, or Stop in the menu).",
            )
            return
        if self.no_model_chosen and self.policy is None:
            self._notify("Task not started", NO_MODEL_WORDS.format(settings=self.settings_path))
            self.open_first_run()
            return
        if self.policy is None:
            self.pending_task = task
            if self.policy_error is not None:
                # Maybe fixed meanwhile (server started, weights downloaded): try again for this task.
                self._load_policy()
                return
            self._notify(*self._waiting_words())
            return
        monitor = self.settings.run.capture_monitor
        screens = len(QtGui.QGuiApplication.screens())
        if monitor is not None and monitor > screens:
            self._show(StatusLine(AppState.ERROR, f"there is no monitor {monitor}"))
            self._notify(
                "Task not started",
                f"The settings name monitor {monitor}, but this display has {screens}. "
                "Choose a monitor in the settings (Monitor), then start the task again.",
            )
            return
        try:
            check_writable(self.settings.sessions.folder)
        except TrajectoryWriteError as exc:
            self._show(StatusLine(AppState.ERROR, str(exc)))
            self._notify("Cannot record the task", f"{exc}. Choose another sessions folder in the settings.")
            return
        run = self.settings.run
        engine = StepEngine(
            self.policy,
            self.approver,
            self.performer,
            self.frames,
            EngineSettings(
                max_steps=run.max_steps,
                monitor=run.capture_monitor,
                trajectory_root=self.settings.sessions.folder,
                keep_screenshots=self.policy.profile.budget.keep_screenshots,
                session_meta={"backend": self.settings.model.backend, "profile": self.settings.model.profile},
            ),
            listener=self.bridge.engine_event.emit,
            questions=self.approver,
            auto_approval=self.approver.auto_approval,  # one rule for "approve all" and the ticked kinds
        )
        if not self._take_turn(f"“{_shortened(task)}” was not started"):
            return
        self.engine = engine
        self.indicator.set_running(True)
        self._start_engine_thread(engine, task)

    def _start_engine_thread(self, engine: StepEngine, task: str) -> None:
        """Run `task` on its own thread. However that thread ends, the app hears that the task ended,
        so a crashed engine can never leave the tray "running" a task that is gone."""

        def target() -> None:
            try:
                engine.run(task)  # reports FINISHED through the listener itself
            except BaseException as exc:  # however the thread ends, the tray hears the task ended
                log.exception("the engine thread died")
                result = RunResult(Outcome.ERROR, f"internal error: {type(exc).__name__}: {exc}", 0, None)
                self.bridge.engine_event.emit(EngineEvent(EngineState.FINISHED, 0, result.detail, result))

        self._engine_thread = threading.Thread(target=target, name="holodesk-engine", daemon=True)
        self._engine_thread.start()

    def stop(self, reason: str = STOPPED_IN_TRAY) -> None:
        if self.engine is not None:
            self.engine.stop(reason)
        self.mcp_clients.stop_runs(reason)

    def _take_turn(self, not_started: str) -> bool:
        """The desktop's turn for a run of the tray's own; False (said in a balloon) while an MCP client's runs."""
        holder = self.turn.take(TRAY_RUN)
        if holder is not None:
            words = f"{not_started}: {holder} is running on this desktop; try again after it."
            self._notify("Something is running", words)
            return False
        self._holds_turn = True
        return True

    # -- MCP clients (`holodesk mcp` relays its host's stdio here) ---------------------------------

    def _on_mcp_connected(self, connection: socket.socket, already_read: bytes) -> None:
        first = self.mcp_clients.connected == 0
        self.mcp_clients.serve(connection, already_read)
        if first:
            self._notify(
                "An agent is connected",
                "An MCP client (through `holodesk mcp`) sends its steps here: each is shown for you to approve,"
                " and Stop in the menu stops it.",
            )

    def _mcp_desk(self) -> Desk:
        """A desk on the tray's own parts for one MCP client, with the settings as they are now."""
        settings = self.settings
        parts = DeskParts(
            self.approver, self.performer, self.frames, settings.sessions.folder, settings.run.capture_monitor
        )
        model = TaskSettings(settings.run.max_steps, settings.model.backend, settings.model.profile)
        return Desk(
            parts,
            self.routines_root,
            steps=StepRunner(parts, turn=self.turn),
            windows=desktop_windows(),
            routine_decider=self.routine_approver,
            tasks=AgentTasks(parts, self.approver, self._model_for_mcp, model, turn=self.turn, keep_policy=False),
        )

    def _model_for_mcp(self) -> ModelPolicy:
        """The tray's loaded model, for an MCP client's task or question (on its thread)."""
        policy = self.policy
        if policy is None:
            raise PolicyUnavailable(self.policy_error or "the tray app's model is not loaded yet; ask again shortly")
        return policy

    # -- routines ---------------------------------------------------------------------------------

    def run_routine(self, name: str) -> None:
        """Replay a saved routine as a run of the step engine (the agent's overlay and panel, stop, pause,
        the session in History); its parameters asked first."""
        if self.engine is not None:
            self._notify("Something is running", f"The routine {name!r} was not started: stop the running one first.")
            return
        try:
            routine = load_routine(self.routines_root / name)
        except (FileNotFoundError, RoutineFileError) as exc:
            self._notify("Routine not started", str(exc))
            return
        values: dict[str, str] = {}
        for parameter in routine.parameters:
            value = ask_parameter(routine, parameter)
            if value is None:
                self._notify("Routine not started", f"{routine.name!r}: no value was given for {parameter.name}.")
                return
            values[parameter.name] = value
        try:
            check_writable(self.settings.sessions.folder)
        except TrajectoryWriteError as exc:
            self._notify("Cannot record the routine", f"{exc}. Choose another sessions folder in the settings.")
            return
        model = self.policy
        grounder = ModelGrounder(model) if model is not None else None

        def agent() -> HandOver | str:
            if model is None:
                return self.policy_error or "the model is not loaded yet"
            return HandOver(model, model.profile.space)

        try:
            policy = RoutinePolicy(
                routine,
                values,
                self.frames,
                self.routine_approver,
                grounder=grounder,
                agent=agent,
                monitor=self.settings.run.capture_monitor,
            )
        except ParameterError as exc:
            self._notify("Routine not started", str(exc))
            return
        engine = routine_engine(
            policy,
            self.routine_approver,
            self.performer,
            self.frames,
            trajectory_root=self.settings.sessions.folder,
            monitor=self.settings.run.capture_monitor,
            agent_steps=self.settings.run.max_steps,
            keep_screenshots=model.profile.budget.keep_screenshots if model is not None else 3,
            listener=self.bridge.engine_event.emit,
            questions=self.routine_approver,
        )
        if not self._take_turn(f"The routine {name!r} was not started"):
            return
        self.engine = engine
        self.routine_policy = policy
        self.last_routine = policy
        self.routine_approver.replaying = policy  # its agent's steps are said to be the agent's
        self.indicator.set_running(True)
        self._start_engine_thread(engine, task_with_values(routine, policy.values))  # recorded as this run's

    def toggle_pause(self) -> None:
        if self.engine is None:
            return
        if self.engine.paused:
            self.engine.resume()
            self._show(StatusLine(AppState.THINKING, "resumed"))
            self._notify("Resumed", "The task goes on.")
        else:
            self.engine.pause()
            self._show(StatusLine(AppState.PAUSED, "pauses before the next step"))
            # Said where it is seen: the step under way finishes first, so nothing else changes yet.
            self._notify("Pausing", "The task pauses before its next step; Resume from the menu.")

    def show_history(self) -> None:
        if self.history is None:
            self.history = HistoryWindow(self.settings.sessions.folder, default_routines_root())
        else:
            self.history.refresh()
        self.history.show()
        self.history.raise_()

    def show_settings(self) -> None:
        self.settings_dialog = SettingsDialog(self.settings, self.settings_path, self.settings_problem)
        self.settings_dialog.saved.connect(self.apply_settings)
        self.settings_dialog.show()

    def apply_settings(self, settings: Settings) -> None:
        model_changed = settings.model != self.settings.model
        hotkeys_changed = settings.hotkeys != self.settings.hotkeys
        self.settings = settings
        self.settings_problem = None
        self.indicator.show_settings_problem(None)
        self.approver.set_auto_approve_kinds(settings.approval.auto_approve)
        if hotkeys_changed:
            self._start_hotkeys()
        if model_changed and self.engine is None:
            self._load_policy()
        elif model_changed:
            self.reload_after_run = True
            self._notify("Model settings saved", "The running task keeps its model; the new one loads next.")

    def quit(self, reason: str = "stopped: the Holodesk tray app was quit from its menu") -> None:
        """Stop what runs (the task's record ends "stopped" with `reason`, its input released), then end."""
        self.stop(reason)
        thread = self._engine_thread
        if thread is not None and thread.is_alive():
            # The engine thread is a daemon: leaving now would cut its run off unrecorded. Bounded, as a
            # step stuck in the model or in a desktop call must not keep the app from ending.
            thread.join(ENGINE_END_WAIT_S)
        self.mcp_clients.close("stopped: the Holodesk tray app is quitting")
        self._stop_hotkeys()
        self.backends.close()
        if self.server is not None:
            self.server.close()
        QtWidgets.QApplication.quit()

    # -- engine events -------------------------------------------------------------------------

    def _on_engine_event(self, event: EngineEvent) -> None:
        if event.state is EngineState.FINISHED and event.result is not None:
            self._finished(event.result)
            return
        detail = f"step {event.step}: {event.detail}" if event.detail else f"step {event.step}"
        if event.state in STEP_BOUNDARIES:
            self._action_presses_stop_key = False  # the next action is not chosen yet
        self._hold_stop_key(event.state in STOP_KEY_STATES and not self._action_presses_stop_key)
        if event.state is EngineState.THINKING:
            routine = self.routine_policy
            if routine is not None and not routine.handed_over:  # no model at work unless a target is lost
                self.thinking.show_state(event.step, "the routine looks for its next step")
            else:
                self.thinking.show_state(event.step)
        elif event.state is EngineState.PAUSED:
            self.thinking.show_state(event.step, "paused (Resume from the menu)")
        else:
            self.thinking.hide_status()
        if event.state in (EngineState.WAITING_APPROVAL, EngineState.WAITING_ANSWER, EngineState.PAUSED):
            self.indicator.show_again()  # no grab until the user answers: the control window may be seen
        state = from_engine(event.state)
        if self.engine is not None and self.engine.paused and state is not AppState.PAUSED:
            # Paused mid-step: the step finishes, but the user must keep seeing that a pause is coming.
            self._show(StatusLine(AppState.PAUSED, f"pauses before the next step; {detail}"))
            return
        self._show(StatusLine(state, detail))

    def _on_auto_approved(self, step: int, action: str) -> None:
        # The user chose this kind for auto-approval; still, every such step is announced, held long
        # enough to read, and listed in the menu (app/gui/tray.py).
        print(f"holodesk: Step {step} approved automatically: {action}", file=sys.stderr, flush=True)
        self.indicator.announce_auto_approved(step, action)

    def _before_action(self, action: Action) -> None:
        """An approved action is about to run (called before the engine may perform it): the stop key
        stays taken for its time, unless the action presses that key itself (the grab would take it)."""
        self._action_presses_stop_key = action_presses(action, stop_key_name(self.settings.hotkeys.stop.key))
        self._hold_stop_key(not self._action_presses_stop_key)

    def _hold_stop_key(self, held: bool) -> None:
        """While the model thinks and while an action runs, the stop key is grabbed (X11): Esc Esc stops
        the run without also reaching the user's window (the stop gesture listens through RECORD, which
        sees grabbed keys). Released before anything else may need the key: the approval panel grabs it
        for itself, the question's reply field and a pause leave it to the user, and an action that
        presses it itself must send it to its window."""
        if held and self._stop_key_grab is None and answer_keys_grabbed(QtGui.QGuiApplication.platformName()):
            grab = KeyGrab({"stop": (stop_keysym(self.settings.hotkeys.stop.key),)}, lambda _key: None)
            if grab.start():
                self._stop_key_grab = grab
        elif not held and self._stop_key_grab is not None:
            self._stop_key_grab.stop()
            self._stop_key_grab = None

    def _finished(self, result: RunResult) -> None:
        self._hold_stop_key(False)
        self.engine = None
        if self._holds_turn:
            self._holds_turn = False
            self.turn.give_back()
        self.overlay.clear()
        self.thinking.hide_status()
        self.indicator.show_again()
        self.indicator.set_running(False)
        if self.reload_after_run:
            self.reload_after_run = False
            self._load_policy()
        state = AppState.ERROR if result.outcome in (Outcome.ERROR, Outcome.FAILED) else AppState.IDLE
        self._show(StatusLine(state, f"{result.outcome.value}: {result.detail}"))
        hint = run_end_hint(result.detail)
        words = f"{result.detail} ({steps_in_words(result.steps)})" + (f"\n{hint}" if hint else "")
        title = OUTCOME_TITLES[result.outcome]
        routine, self.routine_policy = self.routine_policy, None
        if routine is not None:  # a replay: which routine, and what the model and repairs did
            # How the replay ended in a few words: where it stopped or was handed over (the words say why).
            ended = routine.ended.summary if routine.ended is not None else title.lower()
            title = f"Routine {routine.routine.name!r}: {ended}"
            if not routine.handed_over:  # its words count its steps already ("all 2 steps ... done")
                words = result.detail + (f"\n{hint}" if hint else "")
            if routine.model_calls:
                calls = routine.model_calls
                words += f"; the model was asked {'once' if calls == 1 else f'{calls} times'}"
            if routine.repairs_written:
                words += f"; repaired (the previous version is in {routine.repairs_written[-1]})"
        self._notify(title, words)
        sessions = self.settings.sessions
        threading.Thread(
            target=prune_sessions, args=(sessions.folder, sessions.retention_bytes), daemon=True, name="holodesk-prune"
        ).start()

    def _show(self, status: StatusLine) -> None:
        self.indicator.show_status(status)

    def _notify(self, title: str, text: str) -> None:
        """A balloon, and the same words on stderr for a user who started Holodesk from a terminal."""
        print(f"holodesk: {title}: {text}", file=sys.stderr, flush=True)
        self.indicator.notify(title, text)


NO_MODEL_WORDS = (
    "Holodesk is running, but it has no model yet, so it cannot take a task. Choose one with “Choose a model…”"
    " in the tray menu (a small model for this computer, or a model server elsewhere), or run `holodesk setup`"
    " in a terminal; the choice is saved in {settings}."
)


def model_problem_line(backend: str, no_gpu: bool) -> str:
    """The menu's first line while no model is usable: why, in a few words, and what to do."""
    if no_gpu:
        return "⚠ No usable GPU here: choose Settings → Backend: remote"
    if backend == "remote":
        return "⚠ The model server is not ready: open Settings (hover for why)"
    return "⚠ The model could not be loaded: open Settings (hover for why)"


def _shortened(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tray_icon(state: AppState) -> QtGui.QIcon:
    """The tray icon for a state (assets/icons/tray-<state>.svg; paused shares the waiting icon)."""
    name = "waiting" if state is AppState.PAUSED else state.value  # asking has its own: a question mark
    return QtGui.QIcon(str(icon_path(f"tray-{name}")))


def run_app(argv: list[str] | None = None, flags: CommandFlags | None = None) -> int:
    """`holodesk` with no command: become the running instance (or wake the one that runs) and start.

    `flags` (holodesk --backend remote ...) replace the settings file's values for this start.
    """
    loaded = load_settings()
    from_file = loaded.settings.model
    if flags is not None:
        try:
            loaded = dataclasses.replace(loaded, settings=apply_flags(loaded.settings, flags))
        except FlagError as exc:
            print(f"holodesk: {exc}", file=sys.stderr)
            return 2
    platform = apply_qt_platform()  # XWayland on a Wayland session: before the QApplication exists
    if platform.blocker:
        print(f"holodesk: {platform.blocker}", file=sys.stderr, flush=True)
    app = QtWidgets.QApplication(argv if argv is not None else sys.argv[:1])
    app.setApplicationName("Holodesk")
    if platform.blocker:
        # Started from a menu, nobody reads stderr: say it in a window too (native Wayland can show one).
        QtWidgets.QMessageBox.critical(None, "Holodesk needs XWayland", platform.blocker)
        return 1
    try:
        choose_backend()  # a bad HOLODESK_BACKEND: a sentence before anything starts, not a traceback
    except BackendSettingError as exc:
        words = f"{exc}; unset it to let Holodesk choose."
        print(f"holodesk: {words}", file=sys.stderr, flush=True)
        QtWidgets.QMessageBox.critical(None, "Holodesk cannot start", words)  # started from a menu: no stderr
        return 2
    app.setQuitOnLastWindowClosed(False)  # closing the history or settings window must not quit the tray
    try:
        server = acquire_instance()
    except InstanceError as exc:
        print(f"holodesk: {exc}", file=sys.stderr)
        # Started from a menu, nobody reads stderr (a tray app of another install is one such case).
        QtWidgets.QMessageBox.critical(None, "Holodesk cannot start", str(exc))
        return 1
    if server is None:
        print(f"Holodesk is already running on {display_in_words()}: told it to show itself.")
        return 0
    first_run = loaded.problem is None and first_run_needed(loaded.path, loaded.settings.model != from_file)
    holodesk = HolodeskApp(loaded, tray_icon, server, first_run=first_run)
    holodesk.start()
    if platform.warning:
        print(f"holodesk: {platform.warning}", file=sys.stderr, flush=True)
        holodesk.indicator.notify("Holodesk on native Wayland", platform.warning)
    app.aboutToQuit.connect(lambda: server.close())
    # A logout or `kill` ends the tray as its Quit does: the task's record says why, nothing stays held.
    end_on_signals(app, lambda name: holodesk.quit(f"stopped: the Holodesk tray app received {name}"))
    return app.exec()
