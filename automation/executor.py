"""Performs one screen-space action on the real desktop with pyautogui, and nothing it has not checked.

Every action is validated in full before any input is sent: each point must lie on a monitor (and
not on a fail-safe corner), each key must have a pyautogui name on this platform, text must be
typable. A rejected action sends nothing. On X11 keys and text go out by keysym in the active layout group
(automation.x11_keyboard); the clipboard is only a fallback there, pasted with the key the focused
window expects (terminals: ctrl+shift+v). The result's detail says which way the text went. While it runs, a CancelToken
is checked between sub-steps (drag steps, text chunks, scroll notches), and whatever is held down
(mouse button, keys) is released in `finally`, so a stop never leaves a button pressed. While an
action that presses something runs, a marker on disk names what it may hold (automation.held_input),
so that even a kill -9 mid-drag is repaired by the next start.

pyautogui is imported lazily: on X11 it opens the display when imported, and this module must
import on machines (CI, a server) without one.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    Move,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import XCLIP, Clipboard, system_clipboard
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.errors import (
    ActionError,
    AutomationError,
    Cancelled,
    ClipboardError,
    ExecutionError,
    OffScreenError,
)
from holodesk.automation.held_input import BUTTON_NUMBERS, HeldInputMarker
from holodesk.automation.keys import normalize_key
from holodesk.automation.pyautogui_import import import_pyautogui
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.x11_focus_guard import FocusGuard
from holodesk.automation.x11_keyboard import (
    KeysSent,
    TypingUnavailable,
    X11Typer,
    focused_window_class,
    window_class_at,
)
from holodesk.automation.x11_selection import paste_with_own_selection

# pyautogui sleeps PAUSE seconds after every call (0.1 s by default): a 60-step drag would take 6 s
# and every text chunk would stall. Our own waits (drag steps, paste settle) are explicit, so a short
# gap is enough to keep events distinct for applications that drop input arriving too fast.
PYAUTOGUI_PAUSE_S = 0.01

# Characters pyautogui.write can type on every platform; anything else goes through the clipboard.
_TYPABLE_ASCII = frozenset(chr(code) for code in range(0x20, 0x7F)) | {"\n", "\t"}

# pyautogui presses shift around these characters itself; the injected-key log must say so too.
_SHIFTED_PUNCTUATION = frozenset('~!@#$%^&*()_+{}|:"<>?')

# Canonical key names (automation.keys) that pyautogui spells differently on some platform.
# None means the key cannot be pressed through pyautogui there.
_KEY_NAMES_LINUX: dict[str, str | None] = {
    "super": "win",
    "altgr": "altright",
    "menu": "apps",
    "fn": None,  # handled by the keyboard's firmware, never seen by the OS
    # pyautogui's X11 backend has no media keys (they would be silent no-ops)
    "volumeup": None,
    "volumedown": None,
    "volumemute": None,
    "playpause": None,
    "nexttrack": None,
    "prevtrack": None,
}
_KEY_NAMES_WINDOWS: dict[str, str | None] = {
    "super": "win",
    "altgr": "altright",
    "menu": "apps",
    "fn": None,
}
_KEY_NAMES_MACOS: dict[str, str | None] = {
    "super": "command",
    "alt": "option",
    "altgr": "optionright",
    "menu": None,
    "insert": None,
    "printscreen": None,
    "scrolllock": None,
    "numlock": None,
    "pause": None,
    # pyautogui lists media keys on macOS but its keyDown ignores them
    "playpause": None,
    "nexttrack": None,
    "prevtrack": None,
    **{f"f{n}": None for n in range(21, 25)},
}


def _platform_key_table(platform: str) -> dict[str, str | None]:
    if platform == "darwin":
        return _KEY_NAMES_MACOS
    if platform == "win32":
        return _KEY_NAMES_WINDOWS
    return _KEY_NAMES_LINUX


def pyautogui_key_name(key: str, platform: str = sys.platform) -> str:
    """pyautogui's name for a canonical key on `platform`, or an ActionError if it has none."""
    canonical = normalize_key(key)
    table = _platform_key_table(platform)
    if canonical in table:
        name = table[canonical]
        if name is None:
            raise ActionError(f"the key {canonical!r} cannot be pressed on {platform}")
        return name
    return canonical


def paste_keys(platform: str = sys.platform, window_class: str = "") -> tuple[str, ...]:
    """The canonical combination that pastes into a window of `window_class` on `platform`.

    Terminal emulators keep ctrl+v for the shell (a literal next character), so they paste with
    ctrl+shift+v; xterm-style terminals only paste the primary selection, with shift+insert.
    """
    if platform == "darwin":
        return ("super", "v")
    lowered = window_class.lower()
    if lowered in _PRIMARY_SELECTION_TERMINALS:
        return ("shift", "insert")
    if lowered in _TERMINAL_CLASSES or "terminal" in lowered:
        return ("ctrl", "shift", "v")
    return ("ctrl", "v")


# WM_CLASS classes (lower-cased) of X11 terminal emulators that paste the clipboard with ctrl+shift+v.
_TERMINAL_CLASSES = frozenset(
    {"gnome-terminal", "gnome-terminal-server", "konsole", "xfce4-terminal", "mate-terminal", "tilix",
     "terminator", "alacritty", "kitty", "org.wezfurlong.wezterm", "foot", "st-256color", "sakura",
     "terminology", "lxterminal", "qterminal", "guake", "tilda", "yakuake", "ptyxis", "blackbox"}
)  # fmt: skip
# Terminals whose only default paste is the primary selection (shift+insert).
_PRIMARY_SELECTION_TERMINALS = frozenset({"xterm", "uxterm", "urxvt", "rxvt", "urxvt-unicode"})


def is_terminal(window_class: str) -> bool:
    """True for a terminal emulator's WM_CLASS class: its shell reads ctrl+a and Enter as commands."""
    lowered = window_class.lower()
    return lowered in _TERMINAL_CLASSES or lowered in _PRIMARY_SELECTION_TERMINALS or "terminal" in lowered


def select_all_keys(platform: str = sys.platform) -> tuple[str, ...]:
    """The canonical combination that selects a text field's whole content on `platform`."""
    return ("super", "a") if platform == "darwin" else ("ctrl", "a")


def keys_for_text(text: str) -> frozenset[str]:
    """Canonical names of the keys pyautogui.write presses to type `text` (for the injected-key log)."""
    keys: set[str] = set()
    for character in text:
        if character == "\n":
            keys.add("enter")
        elif character == "\t":
            keys.add("tab")
        elif character == " ":
            keys.add("space")
        else:
            keys.add(character.lower())
            if character.isupper() or character in _SHIFTED_PUNCTUATION:
                keys.add("shift")
    return frozenset(keys)


@dataclass(frozen=True, slots=True)
class InjectedKey:
    """One key event the executor sent: canonical key name and `time.monotonic()` when sent."""

    key: str
    at: float


class InjectedInput:
    """A short log of the keys the executor itself presses, for the kill-switch listener to ignore.

    On X11 pynput's `injected` flag is False for XTEST input, so the listener cannot tell our key
    presses from the user's. Each press the executor sends is noted (`note`) just before it is sent,
    and the listener, seeing a press, `claim_press`es it: one noted press accounts for exactly one
    seen press, so a user's press of the same key right after ours (a double Esc after the model's
    Esc, the stop key while the model types it) is left unclaimed and counts as the user's.
    `recently_injected` (a time window) remains for releases and held keys.
    """

    def __init__(
        self,
        max_entries: int = 512,
        clock: Callable[[], float] = time.monotonic,
        claim_within_s: float = 2.0,
    ) -> None:
        self._entries: deque[InjectedKey] = deque(maxlen=max_entries)
        self._held: dict[str, int] = {}
        self._pending: dict[str, deque[float]] = {}
        self._reserved: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._clock = clock
        self.claim_within_s = claim_within_s  # a noted press the listener has not seen by then never came

    def note(self, keys: Iterable[str]) -> None:
        """Record that the executor is about to press each of these (canonical) keys once."""
        now = self._clock()
        with self._lock:
            for key in keys:
                self._entries.append(InjectedKey(key, now))
                self._pending.setdefault(key, deque(maxlen=self._entries.maxlen)).append(now)

    def reserve(self, keys: Iterable[str]) -> None:
        """Keys the user presses to stop a run: the executor types these characters on other keycodes."""
        with self._lock:
            self._reserved = frozenset(keys)

    @property
    def reserved(self) -> frozenset[str]:
        with self._lock:
            return self._reserved

    def claim_press(self, key: str) -> bool:
        """True if a press of `key` just seen is one the executor sent (and no longer counts for later ones)."""
        try:
            canonical = normalize_key(key)
        except ActionError:
            return False  # a key we cannot name is not one we pressed
        cutoff = self._clock() - self.claim_within_s
        with self._lock:
            pending = self._pending.get(canonical)
            while pending and pending[0] < cutoff:
                pending.popleft()
            if pending:
                pending.popleft()
                return True
        return False

    @contextmanager
    def holding(self, keys: Iterable[str]) -> Iterator[None]:
        """Mark keys as held by the executor for the duration of the block."""
        held = tuple(keys)
        self.note(held)
        with self._lock:
            for key in held:
                self._held[key] = self._held.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                for key in held:
                    remaining = self._held.get(key, 0) - 1
                    if remaining > 0:
                        self._held[key] = remaining
                    else:
                        self._held.pop(key, None)
                # Releases are not presses: they enter the time log only.
                now = self._clock()
                self._entries.extend(InjectedKey(key, now) for key in held)

    def held_keys(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._held)

    def recently_injected(self, key: str, within_s: float = 0.3) -> bool:
        """True if the executor holds `key` now or sent it in the last `within_s` seconds."""
        try:
            canonical = normalize_key(key)
        except ActionError:
            return False  # a key we cannot name is not one we pressed
        cutoff = self._clock() - within_s
        with self._lock:
            if canonical in self._held:
                return True
            for entry in reversed(self._entries):
                if entry.at < cutoff:
                    return False
                if entry.key == canonical:
                    return True
        return False

    def entries(self) -> list[InjectedKey]:
        with self._lock:
            return list(self._entries)


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """What happened to one action. `ok` is False when the desktop refused it part-way."""

    action: Action
    ok: bool
    detail: str
    duration_s: float


def _load_pyautogui() -> Any:
    """Import pyautogui (which opens the display on X11) and set it up for the executor."""
    try:
        pyautogui = import_pyautogui()
    except KeyError as exc:  # the X11 backend reads os.environ["DISPLAY"] at import time
        raise ExecutionError(f"cannot send input: no X display (${exc.args[0]} is not set)") from exc
    except Exception as exc:  # python-xlib raises several kinds when the display cannot be opened
        raise ExecutionError(f"cannot send input: loading pyautogui failed: {exc}") from exc
    pyautogui.FAILSAFE = True
    pyautogui.PAUSE = PYAUTOGUI_PAUSE_S
    return pyautogui


def _injection_errors(pyautogui: Any) -> tuple[type[BaseException], ...]:
    """Errors the input backend raises when the desktop refuses input (not programming errors)."""
    errors: list[type[BaseException]] = [OSError, pyautogui.PyAutoGUIException]
    if sys.platform.startswith("linux"):
        from Xlib import error as xerror

        errors += [xerror.XError, xerror.ConnectionClosedError, xerror.DisplayError]
    return tuple(errors)


def _corners(monitor: Monitor) -> list[tuple[int, int]]:
    rect = monitor.rect
    return [
        (rect.left, rect.top),
        (rect.right - 1, rect.top),
        (rect.left, rect.bottom - 1),
        (rect.right - 1, rect.bottom - 1),
    ]


def nudge_off_corners(action: Action, monitors: Sequence[Monitor]) -> tuple[Action, list[str]]:
    """The action with every point on a monitor's corner pixel moved one pixel inwards, and what moved.

    pyautogui's fail-safe stops the run when the pointer reaches a corner; a target drawn there is
    still a target one pixel in. Points off every monitor are left for validation to refuse.
    """
    notes: list[str] = []

    def inwards(point: Point) -> Point:
        try:
            monitor = monitor_at(point, monitors)
        except OffScreenError:
            return point
        if (point.x, point.y) not in _corners(monitor):
            return point
        rect = monitor.rect
        moved = Point(point.x + (1 if point.x == rect.left else -1), point.y + (1 if point.y == rect.top else -1))
        notes.append(f"target {point} is a screen corner (the fail-safe stops there): moved one pixel in to {moved}")
        return moved

    return action.map_points(inwards), notes


class Executor:
    """Performs screen-space actions with pyautogui, one at a time.

    `monitors` fixes the monitors points are checked against; without it they are read from
    `capture` (an automation.screen.ScreenCapture, created on first use) before every action, so a
    monitor plugged in mid-run counts. `injected` is shared with the kill-switch listener.
    """

    def __init__(
        self,
        monitors: Sequence[Monitor] | None = None,
        *,
        capture: ScreenCapture | None = None,
        injected: InjectedInput | None = None,
        clipboard: Clipboard | None = None,
        platform: str = sys.platform,
        multi_click_interval_s: float = 0.04,
        type_chunk_chars: int = 24,
        type_interval_s: float = 0.0,
        drag_step_px: int = 12,
        drag_step_interval_s: float = 0.008,
        focus_settle_s: float = 0.05,
        # Outside X11: how long the pasted text stays on the clipboard before the user's is put back,
        # a guess (0.3 s lost pastes into xterm on a loaded machine). On X11 Holodesk owns the
        # selections itself and waits for the target's request instead (automation.x11_selection).
        paste_settle_s: float = 1.0,
        held_marker: HeldInputMarker | None = None,
        x11_typing: bool | None = None,
        focus_guard: FocusGuard | None = None,
    ) -> None:
        if type_chunk_chars < 1 or drag_step_px < 1:
            raise ValueError("type_chunk_chars and drag_step_px must be at least 1")
        self._fixed_monitors = tuple(monitors) if monitors is not None else None
        self._capture = capture
        self.injected = injected if injected is not None else InjectedInput()
        self._clipboard = clipboard
        self.platform = platform
        # Qt drops a double click whose two presses carry the same X timestamp (same millisecond),
        # which back-to-back injected clicks often do; people click ~100 ms apart anyway.
        self.multi_click_interval_s = multi_click_interval_s
        self.type_chunk_chars = type_chunk_chars
        self.type_interval_s = type_interval_s
        self.drag_step_px = drag_step_px
        self.drag_step_interval_s = drag_step_interval_s
        self.focus_settle_s = focus_settle_s
        self.paste_settle_s = paste_settle_s
        self.paste_offer_timeout_s = 5.0
        self._busy = threading.Lock()
        self._pyautogui: Any | None = None
        self.held_marker = held_marker if held_marker is not None else HeldInputMarker()
        # Layout-independent typing through XTEST wherever an X display is reachable (X11, XWayland).
        if x11_typing is None:
            x11_typing = platform.startswith("linux") and bool(os.environ.get("DISPLAY"))
        # Before keys go out, the keyboard focus leaves Holodesk's own windows (see x11_focus_guard).
        self.focus_guard = focus_guard
        self._typer = (
            X11Typer(
                on_keys=self.injected.note,
                key_interval_s=type_interval_s,
                reserved=lambda: self.injected.reserved,
                held_marker=self.held_marker,
            )
            if x11_typing
            else None
        )

    def close(self) -> None:
        """Give back what the executor set up on the display (the X11 typer's spare keycode bindings)."""
        if self._typer is not None:
            self._typer.close()

    # -- validation: nothing here sends input ----------------------------------------------------

    def monitors(self) -> tuple[Monitor, ...]:
        if self._fixed_monitors is not None:
            return self._fixed_monitors
        if self._capture is None:
            self._capture = ScreenCapture()
        return tuple(self._capture.monitors())

    def validate(self, action: Action) -> None:
        """Raise ActionError, OffScreenError or ClipboardError if the action cannot be performed.

        Checking keys and text needs pyautogui's key tables, so for KeyCombo and TypeText this loads
        pyautogui (ExecutionError without a display); pointer actions are checked without it.
        """
        self._validate(action)

    def _validate(self, action: Action) -> tuple[Monitor, ...]:
        """`validate`, returning the monitors it checked against (empty when the action has no point)."""
        if isinstance(action, Done | AskUser):
            raise ActionError(f"{action.kind!r} is not executable: it ends the run or asks the user, it sends no input")
        if not isinstance(action, Click | Move | Drag | Scroll | TypeText | KeyCombo | HoldAndTap | Wait | UpdatePlan):
            raise ActionError(f"the executor does not know how to perform {type(action).__name__}")
        points = action.points()
        monitors: tuple[Monitor, ...] = ()
        if points:
            monitors = self.monitors()
            for point in points:
                monitor = monitor_at(point, monitors)
                if (point.x, point.y) in _corners(monitor):
                    raise ActionError(
                        f"screen point {point} is a corner of {monitor}: pyautogui's fail-safe would stop the run there"
                    )
        if isinstance(action, KeyCombo):
            self._check_keys(action.keys)
        elif isinstance(action, HoldAndTap):
            self._check_keys((*action.hold, *action.taps))
        elif isinstance(action, TypeText):
            self._validate_typing(action)
        return monitors

    def _check_keys(self, keys: Sequence[str]) -> None:
        """Every key can be pressed here: on X11 by keysym in the active layout group, else by pyautogui name."""
        if self._typer is not None:
            try:
                self._typer.check_keys(keys)
                return
            except TypingUnavailable:
                pass  # no X connection after all: pyautogui's names are what is left
        self._key_names(keys)

    def _validate_typing(self, action: TypeText) -> None:
        """The text can be typed and each option honoured in the window that will receive it."""
        if action.overwrite and self.platform.startswith("linux"):
            window_class = (
                window_class_at(action.at.x, action.at.y) if action.at is not None else focused_window_class()
            )
            if is_terminal(window_class):
                raise ActionError(
                    f"overwrite cannot be honoured in a terminal ({window_class}): select-all there is ctrl+a, "
                    "which moves to the start of the shell's line and would run what is already on it; "
                    "clear the line with a key combination (ctrl+e, then ctrl+u) and type without overwrite"
                )
        if action.overwrite:
            self._check_keys(select_all_keys(self.platform))
        if action.press_enter:
            self._check_keys(("enter",))
        if action.text:
            self._validate_text(action.text)

    def _validate_text(self, text: str) -> None:
        """Typing is possible with key events here, or else through the clipboard."""
        if self._typer is not None:
            try:
                self._typer.check(text)
                return
            except TypingUnavailable:
                pass  # the clipboard is the fallback; it must work then
        elif self._typable(text):
            return
        self._check_keys(paste_keys(self.platform))
        self._resolve_clipboard()

    def _key_names(self, keys: Sequence[str]) -> list[str]:
        names = [pyautogui_key_name(key, self.platform) for key in keys]
        pyautogui = self._load()
        for key, name in zip(keys, names, strict=True):
            # pyautogui silently ignores names it does not know; refuse them instead.
            if not pyautogui.isValidKey(name):
                raise ActionError(f"the key {key!r} ({name!r} to pyautogui) cannot be pressed on this system")
        return names

    def _resolve_clipboard(self) -> Clipboard:
        if self._clipboard is None:
            self._clipboard = system_clipboard(self.platform)
        return self._clipboard

    def _typable(self, text: str) -> bool:
        """True when pyautogui.write types `text` exactly here; otherwise it goes through the clipboard."""
        if not all(character in _TYPABLE_ASCII for character in text):
            return False
        if not self.platform.startswith("linux"):
            return True
        mistyped = x11_mistyped_characters(self._load())
        return not any(character in mistyped for character in text)

    def _load(self) -> Any:
        if self._pyautogui is None:
            self._pyautogui = _load_pyautogui()
        return self._pyautogui

    # -- execution -------------------------------------------------------------------------------

    def execute(self, action: Action, cancel: CancelToken | None = None) -> ExecutionResult:
        """Validate, then perform the action.

        Raises ActionError / OffScreenError / ClipboardError for an action that cannot be performed
        and ExecutionError when no input can be sent at all (pyautogui cannot open the display):
        in both cases nothing was sent. Raises Cancelled when `cancel` fired or pyautogui's fail-safe
        tripped; whatever was held is released first. A valid action that the desktop refused
        part-way returns ok=False with the reason in `detail`.
        """
        started = time.monotonic()
        cancel = cancel if cancel is not None else CancelToken()
        with self._busy:
            monitors = self._validate(action)
            cancel.raise_if_cancelled()
            if isinstance(action, UpdatePlan):  # a plan changes nothing on screen
                return ExecutionResult(action, True, action.listing(), time.monotonic() - started)
            if isinstance(action, Wait):
                if cancel.sleep(action.seconds):
                    cancel.raise_if_cancelled()
                return ExecutionResult(action, True, action.describe(), time.monotonic() - started)
            pyautogui = self._load()
            # Fail-safe corners follow the current monitors (pyautogui fixed them at import time).
            pyautogui.FAILSAFE_POINTS = [
                corner for monitor in monitors or self.monitors() for corner in _corners(monitor)
            ]
            refocused = ""
            if self.focus_guard is not None and isinstance(action, TypeText | KeyCombo) and not action.points():
                refocused = self.focus_guard.restore()
            try:
                with self.held_marker.holding(*self._input_held_by(action)):
                    detail = self._perform(action, pyautogui, cancel)
                if refocused:
                    detail = f"{detail} ({refocused})"
            except pyautogui.FailSafeException as exc:
                raise Cancelled("pyautogui fail-safe: the pointer was moved into a screen corner") from exc
            except AutomationError as exc:
                if isinstance(exc, Cancelled | ActionError | OffScreenError):
                    raise
                return ExecutionResult(action, False, f"{action.describe()} failed: {exc}", time.monotonic() - started)
            except _injection_errors(pyautogui) as exc:
                detail = f"{action.describe()} failed: {type(exc).__name__}: {exc}"
                return ExecutionResult(action, False, detail, time.monotonic() - started)
            return ExecutionResult(action, True, detail, time.monotonic() - started)

    def _input_held_by(self, action: Action) -> tuple[list[int], list[str]]:
        """The mouse buttons (X numbers) and keys (pyautogui names) `action` may hold down at some moment."""
        if isinstance(action, Click | Drag):
            return [BUTTON_NUMBERS[action.button.value]], []
        if isinstance(action, Scroll):
            return [4, 5, 6, 7], []  # pyautogui scrolls by clicking the wheel "buttons"
        if self._typer is not None and isinstance(action, KeyCombo | HoldAndTap | TypeText):
            # The X11 typer names the keycodes it presses itself, once it knows them.
            return ([BUTTON_NUMBERS["left"]] if isinstance(action, TypeText) and action.at is not None else []), []
        if isinstance(action, KeyCombo):
            return [], self._key_names(action.keys)
        if isinstance(action, HoldAndTap):
            return [], self._key_names((*action.hold, *action.taps))
        if isinstance(action, TypeText):
            buttons = [BUTTON_NUMBERS["left"]] if action.at is not None else []
            if self._typable(action.text):
                return buttons, sorted({*action.text, "shift"})  # pyautogui.write presses shift itself
            return buttons, self._key_names(paste_keys(self.platform))
        return [], []

    def _perform(self, action: Action, pyautogui: Any, cancel: CancelToken) -> str:
        if isinstance(action, Click):
            # Click by click rather than pyautogui's clicks=N: its pause between clicks cannot be
            # interrupted, so a stop during a triple click used to let the last clicks happen.
            for index in range(action.count):
                if index and cancel.sleep(self.multi_click_interval_s):
                    cancel.raise_if_cancelled()
                pyautogui.click(action.at.x, action.at.y, button=action.button.value)
        elif isinstance(action, Move):
            pyautogui.moveTo(action.to.x, action.to.y)
        elif isinstance(action, Drag):
            self._drag(action, pyautogui, cancel)
        elif isinstance(action, Scroll):
            self._scroll(action, pyautogui, cancel)
        elif isinstance(action, TypeText):
            return self._type_with_options(action, pyautogui, cancel)
        elif isinstance(action, KeyCombo):
            if self._typer is not None:
                sent = self._typer_keys(action.keys[:-1], action.keys[-1:] * action.repeat, cancel)
                return f"{action.describe()} ({sent.describe()})"
            for _ in range(action.repeat):
                self._press_keys(action.keys, pyautogui, cancel)
        elif isinstance(action, HoldAndTap):
            if self._typer is not None:
                sent = self._typer_keys(action.hold, action.taps, cancel)
                return f"{action.describe()} ({sent.describe()})"
            self._hold_and_tap(action, pyautogui, cancel)
        return action.describe()

    def _typer_keys(self, hold: Sequence[str], taps: Sequence[str], cancel: CancelToken) -> KeysSent:
        """Hold and tap keys by keysym through the X11 typer, noted in the injected-key log."""
        assert self._typer is not None
        with self.injected.holding((*hold, *taps)):
            return self._typer.hold_and_tap(hold, taps, cancel)

    def _type_with_options(self, action: TypeText, pyautogui: Any, cancel: CancelToken) -> str:
        """Typing with `overwrite` (select all first, so the text replaces the field's) and `press_enter`.

        The result lists what was sent, in order.
        """
        if not (action.overwrite or action.press_enter):
            return self._type(action, pyautogui, cancel)
        if action.at is not None:
            pyautogui.click(action.at.x, action.at.y)
            if cancel.sleep(self.focus_settle_s):
                cancel.raise_if_cancelled()
        sent: list[str] = []
        if action.overwrite:
            # Typing over a selection replaces it; an empty field stays as it was.
            keys = select_all_keys(self.platform)
            self._press_keys(keys, pyautogui, cancel)
            sent.append(f"pressed {'+'.join(keys)} to select the field's text")
        if action.text:
            sent.append(self._type(TypeText(action.text), pyautogui, cancel))
        if action.press_enter:
            cancel.raise_if_cancelled()
            self._press_keys(("enter",), pyautogui, cancel)
            sent.append("pressed enter")
        return f"{action.describe()}: {'; '.join(sent)}"

    def _hold_and_tap(self, action: HoldAndTap, pyautogui: Any, cancel: CancelToken) -> None:
        held = self._key_names(action.hold)
        taps = self._key_names(action.taps)
        pressed: list[str] = []
        with self.injected.holding((*action.hold, *action.taps)):
            try:
                for name in held:
                    cancel.raise_if_cancelled()
                    pyautogui.keyDown(name, _pause=False)
                    pressed.append(name)
                for name in taps:
                    cancel.raise_if_cancelled()
                    pyautogui.keyDown(name, _pause=False)
                    pyautogui.keyUp(name, _pause=False)
            finally:
                with _failsafe_suspended(pyautogui):
                    for name in reversed(pressed):
                        pyautogui.keyUp(name, _pause=False)

    def _drag(self, action: Drag, pyautogui: Any, cancel: CancelToken) -> None:
        button = action.button.value
        pyautogui.mouseDown(action.start.x, action.start.y, button=button)
        try:
            # Many small moves rather than one jump: toolkits start a drag only after seeing motion
            # with the button held, and each step is a point where the user can stop it.
            for point in drag_path(action.start, action.end, self.drag_step_px):
                if cancel.sleep(self.drag_step_interval_s):
                    cancel.raise_if_cancelled()
                pyautogui.moveTo(point.x, point.y, _pause=False)
        finally:
            with _failsafe_suspended(pyautogui):
                pyautogui.mouseUp(button=button)

    def _scroll(self, action: Scroll, pyautogui: Any, cancel: CancelToken) -> None:
        if action.at is not None:
            pyautogui.moveTo(action.at.x, action.at.y)
        vertical = action.direction in (ScrollDirection.UP, ScrollDirection.DOWN)
        notch = 1 if action.direction in (ScrollDirection.UP, ScrollDirection.RIGHT) else -1
        for _ in range(action.amount):
            cancel.raise_if_cancelled()
            if vertical:
                pyautogui.scroll(notch)
            else:
                pyautogui.hscroll(notch)

    def _type(self, action: TypeText, pyautogui: Any, cancel: CancelToken) -> str:
        if action.at is not None:
            pyautogui.click(action.at.x, action.at.y)
            if cancel.sleep(self.focus_settle_s):
                cancel.raise_if_cancelled()
        typed_by_keys = ""
        if self._typer is not None:
            self._typer.key_interval_s = self.type_interval_s
            try:
                sent = self._typer.type_text(action.text, cancel)
            except TypingUnavailable as exc:
                typed_by_keys = f"; key events unavailable: {exc}"
            else:
                return f"{action.describe()} (typed as {sent.describe()})"
        elif self._typable(action.text):
            text = action.text
            for begin in range(0, len(text), self.type_chunk_chars):
                cancel.raise_if_cancelled()
                chunk = text[begin : begin + self.type_chunk_chars]
                with self.injected.holding(keys_for_text(chunk)):
                    pyautogui.write(chunk, interval=self.type_interval_s)
            return action.describe()
        keys, taken = self._paste(action.text, pyautogui, cancel)
        return f"{action.describe()} (pasted through the clipboard with {'+'.join(keys)}{taken}{typed_by_keys})"

    def _paste(self, text: str, pyautogui: Any, cancel: CancelToken) -> tuple[tuple[str, ...], str]:
        window_class = focused_window_class() if self.platform.startswith("linux") else ""
        keys = paste_keys(self.platform, window_class)
        clipboard = self._resolve_clipboard()
        if clipboard is XCLIP:  # X11: Holodesk owns the selections and restores once the target took the text
            press = functools.partial(self._press_keys, keys, pyautogui, cancel)
            return keys, "; " + paste_with_own_selection(text, press, timeout_s=self.paste_offer_timeout_s)
        previous = clipboard.read_text()
        clipboard.write_text(text)
        try:
            self._wait_until_offered(clipboard, text)
            cancel.raise_if_cancelled()
            self._press_keys(keys, pyautogui, cancel)
            # The target fetches the clipboard asynchronously after ctrl+v; restoring too soon would
            # make it paste the old content. Not cancellable: a stop here must still wait, then restore.
            time.sleep(self.paste_settle_s)
        finally:
            # Restore what the user had; if it held no text (empty, or an image we cannot carry),
            # clear it rather than leave the typed text (perhaps a password) behind.
            clipboard.write_text(previous if previous is not None else "")
        return keys, ""

    def _wait_until_offered(self, clipboard: Clipboard, text: str) -> None:
        """Return once the clipboard hands out `text` (bounded), before any paste key is pressed.

        xclip claims the selection in a child it forks, after `write_text` has returned: a paste key
        sent before the claim reached the old owner (xterm, owning its own selection, pasted that)."""
        deadline = time.monotonic() + self.paste_offer_timeout_s
        while clipboard.read_text() != text:
            if time.monotonic() >= deadline:
                raise ClipboardError(
                    f"{clipboard.name} did not take over the clipboard within {self.paste_offer_timeout_s:g} s:"
                    " nothing was pasted"
                )
            time.sleep(0.02)

    def _press_keys(self, keys: Sequence[str], pyautogui: Any, cancel: CancelToken) -> None:
        if self._typer is not None:
            self._typer_keys(keys[:-1], keys[-1:], cancel)
            return
        names = self._key_names(keys)
        pressed: list[str] = []
        with self.injected.holding(normalize_key(key) for key in keys):
            try:
                for name in names:
                    cancel.raise_if_cancelled()
                    pyautogui.keyDown(name, _pause=False)
                    pressed.append(name)
            finally:
                with _failsafe_suspended(pyautogui):
                    for name in reversed(pressed):
                        pyautogui.keyUp(name, _pause=False)


_MISTYPED_CACHE: dict[int, frozenset[str]] = {}


def x11_mistyped_characters(pyautogui: Any) -> frozenset[str]:
    """ASCII characters pyautogui's X11 backend would type wrong with the display's keymap.

    It presses one keycode per character and adds shift by a US-keyboard rule (`isShiftCharacter`).
    Where the keymap disagrees it types another character: on the usual pc105 keymap '<' is found on
    the extra key left of z, whose shifted symbol is '>'; on many layouts symbols need AltGr. Text
    with such characters is pasted instead. Computed once per display connection.
    """
    backend = pyautogui.platformModule
    display = backend._display
    cached = _MISTYPED_CACHE.get(id(display))
    if cached is not None:
        return cached
    wrong = set()
    for character in _TYPABLE_ASCII - {"\n", "\t"}:
        keycode = backend.keyboardMapping.get(character)
        if not keycode:
            wrong.add(character)
            continue
        base = display.keycode_to_keysym(keycode, 0)
        produced = base
        if pyautogui.isShiftCharacter(character):
            produced = display.keycode_to_keysym(keycode, 1)
            if not produced:  # core protocol: no shifted symbol means the unshifted one (upper-cased)
                produced = base - 0x20 if ord("a") <= base <= ord("z") else base
        # Keysyms of printable ASCII equal their code points.
        if produced != ord(character):
            wrong.add(character)
    result = frozenset(wrong)
    _MISTYPED_CACHE.clear()  # only the current connection matters
    _MISTYPED_CACHE[id(display)] = result
    return result


def drag_path(start: Point, end: Point, step_px: int) -> list[Point]:
    """Points from just after `start` to `end` (inclusive), at most `step_px` apart."""
    distance = math.hypot(end.x - start.x, end.y - start.y)
    steps = max(1, math.ceil(distance / step_px))
    return [
        Point(round(start.x + (end.x - start.x) * i / steps), round(start.y + (end.y - start.y) * i / steps))
        for i in range(1, steps + 1)
    ]


@contextmanager
def _failsafe_suspended(pyautogui: Any) -> Iterator[None]:
    """Release what is held even when the fail-safe tripped: pyautogui checks it before every call."""
    previous = pyautogui.FAILSAFE
    pyautogui.FAILSAFE = False
    try:
        yield
    finally:
        pyautogui.FAILSAFE = previous
