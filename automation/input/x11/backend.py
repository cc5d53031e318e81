"""The X11 input backend: primitives through XTEST, keys by keysym in the active layout group.

Keys and text go out by keysym in the active XKB group, read at each action (automation.input.x11.keyboard);
where no X connection for that exists, pyautogui's key names and `write` are used, and text they would
type wrong with this keymap is pasted. The clipboard is the fallback for text the layout cannot
type, pasted with the key the focused program expects (terminals: ctrl+shift+v; xterm: shift+insert),
only once the clipboard offers the new text. The pointer goes through pyautogui, whose fail-safe
(the pointer in a screen corner) stops the run. While an action that presses something runs, a marker
on disk names what it may hold (automation.held_input), so even a kill -9 mid-drag is repaired by
the next start; what is held is released in `finally`.

pyautogui is imported lazily: on X11 it opens the display when imported, and this module must
import on machines (CI, a server) without one.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from holodesk.automation.actions import Action, Click, Drag, HoldAndTap, KeyCombo, Scroll, ScrollDirection, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import XCLIP, Clipboard, system_clipboard
from holodesk.automation.coords import Monitor
from holodesk.automation.errors import (
    ActionError,
    AutomationError,
    Cancelled,
    ClipboardError,
    DesktopRefused,
    ExecutionError,
    OffScreenError,
)
from holodesk.automation.held_input import BUTTON_NUMBERS, HeldInputMarker
from holodesk.automation.input.backend import InputCapabilities, Unconfirmed
from holodesk.automation.input.corners import corner_pixels
from holodesk.automation.input.injected import InjectedInput, keys_for_text
from holodesk.automation.input.plan import TYPED, InputTarget, TextRoute
from holodesk.automation.input.primitives import (
    ButtonClicks,
    ButtonDrag,
    KeyPresses,
    PastedText,
    Pause,
    PointerTo,
    Primitive,
    TypedText,
    WheelScroll,
    drag_path,
)
from holodesk.automation.input.programs import LETTERLESS_PASTE_KEYS, is_terminal, paste_keys, select_all_keys
from holodesk.automation.input.x11.focus_guard import FocusGuard
from holodesk.automation.input.x11.keyboard import (
    KeysSent,
    TypingUnavailable,
    X11Typer,
    focused_window_class,
    window_class_at,
)
from holodesk.automation.input.x11.selection import PasteNotTaken, check_offer_size, paste_with_own_selection
from holodesk.automation.keys import normalize_key
from holodesk.automation.pyautogui_import import import_pyautogui
from holodesk.automation.screen import ScreenCapture

# pyautogui sleeps PAUSE seconds after every call (0.1 s by default): a 60-step drag would take 6 s
# and every text chunk would stall. Our own waits (drag steps, paste settle) are explicit, so a short
# gap is enough to keep events distinct for applications that drop input arriving too fast.
PYAUTOGUI_PAUSE_S = 0.01

# Characters pyautogui.write can type on every platform; anything else goes through the clipboard.
_TYPABLE_ASCII = frozenset(chr(code) for code in range(0x20, 0x7F)) | {"\n", "\t"}

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

# What the keyboard sent in XKB terms (key presses, layout group, spare keycodes): for the log, not the
# step's result, which says what happened in a person's words.
log = logging.getLogger(__name__)


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


def _load_pyautogui() -> Any:
    """Import pyautogui (which opens the display on X11) and set it up for this backend."""
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


class X11Input:
    """The X11 input backend (automation.input.backend.InputBackend).

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
        # selections itself and waits for the target's request instead (automation.input.x11.selection).
        paste_settle_s: float = 1.0,
        held_marker: HeldInputMarker | None = None,
        x11_typing: bool | None = None,
        focus_guard: FocusGuard | None = None,
    ) -> None:
        if type_chunk_chars < 1 or drag_step_px < 1:
            raise ValueError("type_chunk_chars and drag_step_px must be at least 1")
        self._fixed_monitors = tuple(monitors) if monitors is not None else None
        self._capture = capture
        self._injected = injected if injected is not None else InjectedInput()
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
        self._pyautogui: Any | None = None
        self.held_marker = held_marker if held_marker is not None else HeldInputMarker()
        # Layout-independent typing through XTEST wherever an X display is reachable (X11, XWayland).
        if x11_typing is None:
            x11_typing = platform.startswith("linux") and bool(os.environ.get("DISPLAY"))
        # Before keys go out, the keyboard focus leaves Holodesk's own windows (see automation.input.x11.focus_guard).
        self.focus_guard = focus_guard
        self._typer = (
            X11Typer(
                on_keys=self._injected.note,
                key_interval_s=type_interval_s,
                reserved=lambda: self._injected.reserved,
                held_marker=self.held_marker,
            )
            if x11_typing
            else None
        )
        self._capabilities = InputCapabilities(
            name="X11 (XTEST)", knows_focused_program=platform.startswith("linux"), refuses_corners=True
        )

    @property
    def capabilities(self) -> InputCapabilities:
        return self._capabilities

    @property
    def injected(self) -> InjectedInput:
        return self._injected

    def close(self) -> None:
        """Give back the X11 typer's spare keycode bindings (those no program may still read keys on)."""
        if self._typer is not None:
            kept = self._typer.close()
            if kept:
                log.warning("%s", kept)

    # -- what the plan needs, and checks: nothing here sends input -------------------------------

    def monitors(self) -> tuple[Monitor, ...]:
        if self._fixed_monitors is not None:
            return self._fixed_monitors
        if self._capture is None:
            self._capture = ScreenCapture()
        return tuple(self._capture.monitors())

    def input_target(self, action: Action) -> InputTarget:
        """The program keys go to (the window under `at`, else the focused one), its keys, the text's route."""
        if not isinstance(action, TypeText):
            return InputTarget(
                "", select_all_keys(self.platform), paste_keys(self.platform), TYPED, self.focus_settle_s
            )
        program = ""
        if self.platform.startswith("linux"):
            program = window_class_at(action.at.x, action.at.y) if action.at is not None else focused_window_class()
        route = self._text_route(action.text) if action.text else TYPED
        return InputTarget(
            program, select_all_keys(self.platform), self._paste_keys(program), route, self.focus_settle_s
        )

    def _paste_keys(self, program: str) -> tuple[str, ...]:
        """The program's paste key, or shift+insert where the active layout group lacks its letter.

        Programs read a shortcut's letter differently once the active group has none: Chromium by
        the physical key (a spare keycode bound to v pastes nothing), kitty only in the active group
        (the key that has v in group 1 is ctrl+shift+м there, sent into the terminal's program as an
        escape sequence). shift+insert has no letter: text fields and Chromium paste the clipboard
        with it, terminals the primary selection, and Holodesk's own offer holds both.
        """
        keys = paste_keys(self.platform, program)
        if self._typer is not None and keys != LETTERLESS_PASTE_KEYS and not self._typer.active_group_has(keys[-1]):
            return LETTERLESS_PASTE_KEYS
        return keys

    def _text_route(self, text: str) -> TextRoute:
        """Typed with key events where possible here, else pasted (and why)."""
        if self._typer is not None:
            try:
                self._typer.check(text)
                return TYPED
            except TypingUnavailable as exc:
                return TextRoute(False, f"key events unavailable: {exc}")
        if self._typable(text):
            return TYPED
        return TextRoute(False)

    def check(self, step: Primitive) -> None:
        if isinstance(step, KeyPresses):
            self._check_keys(step.keys)
        elif isinstance(step, PastedText):
            self._check_keys(step.keys)
            if self._resolve_clipboard() is XCLIP:  # offered by Holodesk's own selection owner
                check_offer_size(step.text)

    def _check_keys(self, keys: Sequence[str]) -> None:
        """Every key can be pressed here: on X11 by keysym in the active layout group, else by pyautogui name."""
        if self._typer is not None:
            try:
                self._typer.check_keys(keys)
                return
            except TypingUnavailable:
                pass  # no X connection after all: pyautogui's names are what is left
        self._key_names(keys)

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

    # -- performing ------------------------------------------------------------------------------

    @contextmanager
    def acting(self, action: Action, steps: tuple[Primitive, ...]) -> Iterator[None]:
        """Fail-safe corners set, the focus given back to the user's window for keys, the held-input
        marker written; the desktop's refusals become DesktopRefused, the fail-safe a Cancelled."""
        pyautogui = self._load()
        # Fail-safe corners follow the current monitors (pyautogui fixed them at import time).
        pyautogui.FAILSAFE_POINTS = [corner for monitor in self.monitors() for corner in corner_pixels(monitor)]
        if self.focus_guard is not None and isinstance(action, TypeText | KeyCombo) and not action.points():
            self._refocused = self.focus_guard.restore()
        try:
            with self.held_marker.holding(*self._input_held_by(action, steps)):
                yield
        except pyautogui.FailSafeException as exc:
            raise Cancelled("pyautogui fail-safe: the pointer was moved into a screen corner") from exc
        except (Cancelled, ActionError, OffScreenError, DesktopRefused):
            raise
        except AutomationError as exc:
            raise DesktopRefused(str(exc)) from exc
        except _injection_errors(pyautogui) as exc:
            raise DesktopRefused(f"{type(exc).__name__}: {exc}") from exc

    _refocused = ""

    def _input_held_by(self, action: Action, steps: tuple[Primitive, ...]) -> tuple[list[int], list[str]]:
        """The mouse buttons (X numbers) and keys (pyautogui names) `action` may hold down at some moment."""
        if isinstance(action, Click | Drag):
            return [BUTTON_NUMBERS[action.button.value]], []
        if isinstance(action, Scroll):
            return [4, 5, 6, 7], []  # pyautogui scrolls by clicking the wheel "buttons"
        buttons = [BUTTON_NUMBERS["left"]] if isinstance(action, TypeText) and action.at is not None else []
        if self._typer is not None and isinstance(action, KeyCombo | HoldAndTap | TypeText):
            return buttons, []  # the X11 typer names the keycodes it presses itself, once it knows them
        keys: set[str] = set()
        for step in steps:
            if isinstance(step, KeyPresses):
                keys.update(self._key_names(step.keys))
            elif isinstance(step, TypedText):
                keys.update({*step.text, "shift"})  # pyautogui.write presses shift itself
            elif isinstance(step, PastedText):
                keys.update(self._key_names(step.keys))
        return buttons, sorted(keys)

    def perform(self, step: Primitive, cancel: CancelToken) -> str | Unconfirmed:
        pyautogui = self._load()
        note: str | Unconfirmed = ""
        if isinstance(step, PointerTo):
            pyautogui.moveTo(step.at.x, step.at.y)
        elif isinstance(step, ButtonClicks):
            # Click by click rather than pyautogui's clicks=N: its pause between clicks cannot be
            # interrupted, so a stop during a triple click used to let the last clicks happen.
            for index in range(step.count):
                if index and cancel.sleep(self.multi_click_interval_s):
                    cancel.raise_if_cancelled()
                pyautogui.click(button=step.button.value)
        elif isinstance(step, ButtonDrag):
            self._drag(step, pyautogui, cancel)
        elif isinstance(step, WheelScroll):
            self._scroll(step, pyautogui, cancel)
        elif isinstance(step, KeyPresses):
            note = self._press(step.hold, step.taps, pyautogui, cancel)
        elif isinstance(step, TypedText):
            note = self._type(step.text, pyautogui, cancel)
        elif isinstance(step, PastedText):
            note = self._paste(step, pyautogui, cancel)
        elif isinstance(step, Pause):
            raise AssertionError("the performer waits itself")
        if self._refocused:
            said = note.note if isinstance(note, Unconfirmed) else note
            said, self._refocused = f"{said}; {self._refocused}" if said else self._refocused, ""
            note = replace(note, note=said) if isinstance(note, Unconfirmed) else said
        return note

    def _press(
        self, hold: Sequence[str], taps: Sequence[str], pyautogui: Any, cancel: CancelToken
    ) -> str | Unconfirmed:
        """Hold `hold`, tap `taps`, release `hold` in reverse (also on a stop or a fault)."""
        if self._typer is not None:
            sent = self._typer_keys(hold, taps, cancel)
            log.info("pressed %s", sent.describe())
            return Unconfirmed(sent.unconfirmed) if sent.unconfirmed else ""
        held = self._key_names(hold)
        tapped = self._key_names(taps)
        pressed: list[str] = []
        with self._injected.holding(normalize_key(key) for key in (*hold, *taps)):
            try:
                for name in held:
                    cancel.raise_if_cancelled()
                    pyautogui.keyDown(name, _pause=False)
                    pressed.append(name)
                for name in tapped:
                    cancel.raise_if_cancelled()
                    pyautogui.keyDown(name, _pause=False)
                    pyautogui.keyUp(name, _pause=False)
            finally:
                with _failsafe_suspended(pyautogui):
                    for name in reversed(pressed):
                        pyautogui.keyUp(name, _pause=False)
        return ""

    def _typer_keys(self, hold: Sequence[str], taps: Sequence[str], cancel: CancelToken) -> KeysSent:
        """Hold and tap keys by keysym through the X11 typer, noted in the injected-key log."""
        assert self._typer is not None
        with self._injected.holding((*hold, *taps)):
            return self._typer.hold_and_tap(hold, taps, cancel)

    def _drag(self, step: ButtonDrag, pyautogui: Any, cancel: CancelToken) -> None:
        button = step.button.value
        pyautogui.mouseDown(step.start.x, step.start.y, button=button)
        try:
            # Many small moves rather than one jump: toolkits start a drag only after seeing motion
            # with the button held, and each step is a point where the user can stop it.
            for point in drag_path(step.start, step.end, self.drag_step_px):
                if cancel.sleep(self.drag_step_interval_s):
                    cancel.raise_if_cancelled()
                pyautogui.moveTo(point.x, point.y, _pause=False)
        finally:
            with _failsafe_suspended(pyautogui):
                pyautogui.mouseUp(button=button)

    def _scroll(self, step: WheelScroll, pyautogui: Any, cancel: CancelToken) -> None:
        vertical = step.direction in (ScrollDirection.UP, ScrollDirection.DOWN)
        notch = 1 if step.direction in (ScrollDirection.UP, ScrollDirection.RIGHT) else -1
        for _ in range(step.notches):
            cancel.raise_if_cancelled()
            if vertical:
                pyautogui.scroll(notch)
            else:
                pyautogui.hscroll(notch)

    def _type(self, text: str, pyautogui: Any, cancel: CancelToken) -> str | Unconfirmed:
        if self._typer is not None:
            self._typer.key_interval_s = self.type_interval_s
            try:
                sent = self._typer.type_text(text, cancel)
            except TypingUnavailable as exc:
                # The layout changed since the check: the clipboard still carries the text.
                window_class = focused_window_class() if self.platform.startswith("linux") else ""
                pasted = PastedText(text, self._paste_keys(window_class), f"key events unavailable: {exc}")
                return self._paste(pasted, pyautogui, cancel)
            log.info("typed as %s", sent.describe())
            return Unconfirmed(sent.unconfirmed) if sent.unconfirmed else ""
        for begin in range(0, len(text), self.type_chunk_chars):
            cancel.raise_if_cancelled()
            chunk = text[begin : begin + self.type_chunk_chars]
            with self._injected.holding(keys_for_text(chunk)):
                pyautogui.write(chunk, interval=self.type_interval_s)
        return ""

    def _paste(self, step: PastedText, pyautogui: Any, cancel: CancelToken) -> str:
        keys = step.keys
        reason = f"; {step.reason}" if step.reason else ""
        clipboard = self._resolve_clipboard()
        if clipboard is XCLIP:  # X11: Holodesk owns the selections and restores once the target took the text

            def press() -> None:
                self._press(keys[:-1], keys[-1:], pyautogui, cancel)

            try:
                taken = paste_with_own_selection(step.text, press, timeout_s=self.paste_offer_timeout_s)
            except PasteNotTaken as exc:
                raise PasteNotTaken(f"{exc}; {_unpasted_key_words(keys)}") from exc
            return f"pasted through the clipboard with {'+'.join(keys)}; {taken}{reason}"
        previous = clipboard.read_text()
        clipboard.write_text(step.text)
        try:
            self._wait_until_offered(clipboard, step.text)
            cancel.raise_if_cancelled()
            self._press(keys[:-1], keys[-1:], pyautogui, cancel)
            # The target fetches the clipboard asynchronously after ctrl+v; restoring too soon would
            # make it paste the old content. Not cancellable: a stop here must still wait, then restore.
            time.sleep(self.paste_settle_s)
        finally:
            # Restore what the user had; if it held no text (empty, or an image we cannot carry),
            # clear it rather than leave the typed text (perhaps a password) behind.
            clipboard.write_text(previous if previous is not None else "")
        return f"pasted through the clipboard with {'+'.join(keys)}{reason}"

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


def _unpasted_key_words(keys: Sequence[str]) -> str:
    """What became of a paste key nobody took the text for: it reached the focused program as a key."""
    combination = "+".join(keys)
    program = focused_window_class()
    if is_terminal(program):
        return (
            f"{combination} reached {program} as a key press, and a terminal passes a key it does not "
            "take as its own shortcut on to the program running in it (kitty encodes a combination "
            "such as ctrl+shift+м as the escape sequence ESC[1084;6u): that program received it"
        )
    return f"{combination} reached the focused program ({program or 'unnamed'}) as a key press"


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


@contextmanager
def _failsafe_suspended(pyautogui: Any) -> Iterator[None]:
    """Release what is held even when the fail-safe tripped: pyautogui checks it before every call."""
    previous = pyautogui.FAILSAFE
    pyautogui.FAILSAFE = False
    try:
        yield
    finally:
        pyautogui.FAILSAFE = previous
