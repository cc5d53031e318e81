"""Global hotkeys through pynput: one opens the task prompt, a double Esc stops the run, and each
routine with a hotkey of its own (checked by `holodesk.app.common.routine_hotkeys`) starts that routine.

`OwnWindowsStopKey` keeps the stop gesture working in Holodesk's own windows where nothing listens
globally (Wayland: pynput hears only XWayland, and the portal cannot bind "Esc twice").

pynput calls back on its own thread; `HotkeySignals` turns the callbacks into Qt signals so the
GUI thread does the work. Keys that Holodesk itself is injecting (the input performer's `InjectedInput`
log) are ignored: on X11 pynput cannot tell XTEST input from a real keyboard, so without this a
"press esc" action, typed twice, would stop the very run that sent it. Presses are matched one for
one with the performer's, so the user's own presses of the same key still count, whatever the stop
key, even right after the model pressed it.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.session_words import hotkey_in_words
from holodesk.app.gui.key_grab import KeyGrab, hotkey_grab
from holodesk.app.gui.qt import Qt, QtCore, QtGui, Signal
from holodesk.automation.actions import Action, HoldAndTap, KeyCombo, TypeText
from holodesk.automation.input.injected import InjectedInput, keys_for_text
from holodesk.automation.keys import normalize_key

log = logging.getLogger(__name__)

DOUBLE_PRESS_WINDOW_S = 0.5


class HotkeyError(HolodeskAppError):
    """Global hotkeys are not available (Wayland, no X server, a malformed hotkey)."""


class RepeatedPressDetector:
    """True when a key has been pressed `presses` times, each within `window_s` of the one before."""

    def __init__(
        self, presses: int = 2, window_s: float = DOUBLE_PRESS_WINDOW_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if presses < 1:
            raise ValueError(f"presses must be at least 1, got {presses}")
        self.presses = presses
        self.window_s = window_s
        self._clock = clock
        self._count = 0
        self._last: float | None = None

    def press(self) -> bool:
        now = self._clock()
        in_time = self._last is not None and now - self._last <= self.window_s
        self._count = self._count + 1 if in_time else 1
        self._last = now
        if self._count >= self.presses:
            self._count, self._last = 0, None  # the next press starts a new series
            return True
        return False


def stop_key_name(pynput_key: str) -> str:
    """'<esc>' (pynput syntax) or 'q' -> Holodesk's canonical key name."""
    return normalize_key(pynput_key.strip().removeprefix("<").removesuffix(">"))


def action_presses(action: Action, key: str) -> bool:
    """Whether performing `action` may press `key` (canonical): then a grab of it would take the
    action's own press from the window it is meant for. Text that is not plain characters counts as
    pressing anything (its keys are not all named here)."""
    if isinstance(action, KeyCombo):
        return key in action.keys
    if isinstance(action, HoldAndTap):
        return key in action.hold or key in action.taps
    if isinstance(action, TypeText):
        odd = any(not character.isprintable() and character not in "\n\t" for character in action.text)
        return odd or key in keys_for_text(action.text) or (key == "enter" and action.press_enter)
    return False


def key_name(key: Any) -> str | None:
    """A pynput key as Holodesk's canonical key name (for the injected-input log)."""
    name = getattr(key, "name", None)  # pynput.keyboard.Key members
    if name:
        return {"esc": "esc", "ctrl_l": "ctrl", "ctrl_r": "ctrl", "alt_l": "alt", "alt_r": "alt",
                "alt_gr": "altgr", "shift_r": "shift", "cmd": "super", "cmd_l": "super", "cmd_r": "super",
                "page_up": "pageup", "page_down": "pagedown"}.get(name, name)  # fmt: skip
    char = getattr(key, "char", None)
    return char.lower() if isinstance(char, str) and char else None


class HotkeyListener:
    """Listens to the whole keyboard: `on_prompt` for the prompt hotkey, `on_stop` for the stop gesture.

    The stop gesture is `stop_key` pressed `stop_presses` times, each within `stop_window_s` of the last.
    `routine_hotkeys` maps further hotkeys to their callbacks (a routine's run).
    """

    def __init__(
        self,
        prompt_hotkey: str,
        on_prompt: Callable[[], None],
        on_stop: Callable[[], None],
        injected: InjectedInput | None = None,
        stop_key: str = "<esc>",
        stop_presses: int = 2,
        stop_window_s: float = DOUBLE_PRESS_WINDOW_S,
        routine_hotkeys: Mapping[str, Callable[[], None]] | None = None,
    ) -> None:
        self.prompt_hotkey = prompt_hotkey
        self.routine_hotkeys = dict(routine_hotkeys or {})
        self.on_prompt = on_prompt
        self.on_stop = on_stop
        self.injected = injected
        self.stop_key = stop_key_name(stop_key)
        if injected is not None and len(self.stop_key) == 1:
            injected.reserve({self.stop_key})  # typed by the performer on a key of its own
        self._stop_detector = RepeatedPressDetector(stop_presses, stop_window_s)
        self._listener: Any = None
        self._hotkeys: list[Any] = []
        self._grabs: list[KeyGrab] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        try:
            from pynput import keyboard
        except ImportError as exc:  # pynput raises ImportError when it cannot reach a display server
            raise HotkeyError(f"global hotkeys are unavailable: {str(exc).splitlines()[0]}") from None
        wanted = {self.prompt_hotkey: self._fire_prompt}
        for hotkey, callback in self.routine_hotkeys.items():
            wanted[hotkey] = functools.partial(self._call, callback)
        hotkeys = []
        for hotkey, fire in wanted.items():
            try:
                hotkeys.append(keyboard.HotKey(keyboard.HotKey.parse(hotkey), fire))
            except ValueError as exc:
                which = "prompt hotkey" if hotkey == self.prompt_hotkey else "routine hotkey"
                raise HotkeyError(f"the {which} {hotkey_in_words(hotkey)} is not valid: {exc}") from None
        self._hotkeys = hotkeys
        listener = keyboard.Listener(on_press=self._on_press, on_release=self._on_release)
        listener.start()
        listener.wait()  # ready: events from now on are seen
        self._listener = listener
        # The hotkey is Holodesk's alone: grabbed, it no longer also reaches the focused window
        # (pynput listens through RECORD and still sees it). Not on X11: nothing to grab.
        for hotkey in wanted:
            try:
                grab = hotkey_grab(hotkey)
            except ValueError:
                continue
            if grab.start():
                self._grabs.append(grab)
            else:
                log.info("could not grab the hotkey %s; it also reaches the focused window", hotkey)

    def stop(self) -> None:
        for grab in self._grabs:
            grab.stop()
        self._grabs = []
        if self._listener is not None:
            # pynput's X11 thread only notices the stop with the next key event; it is a daemon
            # thread, so it is not joined here (joining would stall quitting until a key is pressed).
            self._listener.stop()
            self._listener = None

    def _ours(self, key: Any) -> bool:
        name = key_name(key)
        return bool(self.injected and name and self.injected.recently_injected(name))

    def _our_press(self, key: Any) -> bool:
        """A press the performer sent (each noted press claims one seen press; the rest are the user's)."""
        name = key_name(key)
        return bool(self.injected and name and self.injected.claim_press(name))

    def _on_press(self, key: Any) -> None:
        if self._our_press(key):
            return
        canonical = self._listener.canonical(key) if self._listener else key
        with self._lock:
            for hotkey in self._hotkeys:
                hotkey.press(canonical)
        if key_name(key) == self.stop_key and self._stop_detector.press():
            self._call(self.on_stop)

    def _on_release(self, key: Any) -> None:
        if self._ours(key):
            return
        canonical = self._listener.canonical(key) if self._listener else key
        with self._lock:
            for hotkey in self._hotkeys:
                hotkey.release(canonical)

    def _fire_prompt(self) -> None:
        self._call(self.on_prompt)

    @staticmethod
    def _call(callback: Callable[[], None]) -> None:
        try:
            callback()
        except Exception:  # a failing callback must not kill pynput's thread
            log.exception("hotkey callback failed")


class HotkeySignals(QtCore.QObject):
    """Qt signals for the hotkeys; emitted from pynput's thread, delivered queued on the GUI thread."""

    prompt_requested = Signal()
    stop_requested = Signal()
    routine_requested = Signal(str)  # the routine's name

    def listener(
        self,
        prompt_hotkey: str,
        injected: InjectedInput | None,
        routine_hotkeys: Mapping[str, str] | None = None,
        **stop_gesture: Any,
    ) -> HotkeyListener:
        """A listener whose presses become these signals; `routine_hotkeys` maps a hotkey to a routine's name."""
        routines = {
            hotkey: functools.partial(self.routine_requested.emit, name)
            for hotkey, name in (routine_hotkeys or {}).items()
        }
        return HotkeyListener(
            prompt_hotkey,
            self.prompt_requested.emit,
            self.stop_requested.emit,
            injected,
            routine_hotkeys=routines,
            **stop_gesture,
        )


# Qt keys that have no text, by Holodesk's canonical name (the rest are named by their text).
_QT_KEY_NAMES = {
    Qt.Key.Key_Escape: "esc", Qt.Key.Key_Pause: "pause", Qt.Key.Key_Tab: "tab", Qt.Key.Key_Backspace: "backspace",
    Qt.Key.Key_Delete: "delete", Qt.Key.Key_Insert: "insert", Qt.Key.Key_Home: "home", Qt.Key.Key_End: "end",
    Qt.Key.Key_Return: "enter", Qt.Key.Key_Enter: "enter", Qt.Key.Key_Space: "space",
    **{getattr(Qt.Key, f"Key_F{n}"): f"f{n}" for n in range(1, 13)},
}  # fmt: skip


def qt_key_name(event: QtGui.QKeyEvent) -> str | None:
    """A Qt key event as Holodesk's canonical key name, or None."""
    name = _QT_KEY_NAMES.get(Qt.Key(event.key()))
    if name:
        return name
    text = event.text()
    return text.lower() if len(text) == 1 and text.isprintable() else None


class OwnWindowsStopKey(QtCore.QObject):
    """The stop gesture (`stop_key` pressed `presses` times) typed into any Holodesk window emits `triggered`.

    Installed on the application, it sees each key press once, as its window receives it (before
    the widget with the focus), and never consumes it: Esc still closes the prompt and answers the
    approval panel. Presses the performer sent (`injected`) do not count, as for `HotkeyListener`.
    """

    triggered = Signal()

    def __init__(
        self,
        stop_key: str = "<esc>",
        presses: int = 2,
        window_s: float = DOUBLE_PRESS_WINDOW_S,
        injected: InjectedInput | None = None,
        parent: QtCore.QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.stop_key = stop_key_name(stop_key)
        self.injected = injected
        self._detector = RepeatedPressDetector(presses, window_s)

    def eventFilter(self, watched: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.KeyPress and isinstance(watched, QtGui.QWindow):
            assert isinstance(event, QtGui.QKeyEvent)
            if event.isAutoRepeat() or qt_key_name(event) != self.stop_key:
                return False
            if self.injected is not None and self.injected.claim_press(self.stop_key):
                return False
            if self._detector.press():
                self.triggered.emit()
        return False
