"""Input on wlroots desktops (sway): text on the run's virtual keyboard, keys with wtype, pointer steps handed on.

Text is typed on the run's own virtual keyboard (SeatKeyboard, seat_keyboard.py), kept on the seat
for the run and opened by `check` before the approval (without pywayland or the protocol, typing is
refused in words): each chunk of text goes with a keymap holding exactly its characters, on keys
that programs treat as character keys (text_keymap.py), so text arrives the same on every layout the
user has; nothing here reads the user's layout. Characters beyond U+FFFF (emoji) are refused in words:
Chromium on Wayland reads them as other characters. Key combinations go through wtype, whose virtual
keyboard holds the modifiers (ctrl, alt, shift, super, altgr) in its modifier state and the other keys
by keysym; each call taps Shift first, which types nothing, as margin for the first key of its new
keyboard (the kept seat keyboard is what stops programs missing it: seat_keyboard.py).

Pointer actions (click, move, drag, scroll) go to the run's one virtual pointer (pointer.py, the
wlr virtual-pointer protocol through pywayland) when one is given; `check` asks it, before the
approval, whether it can serve, and passes on its refusal in words (pywayland missing, a compositor
without the protocol, a scale other than 1). Without one, pointer actions are refused
(POINTER_NOT_WIRED). Pasting is not done (text is always typed). Wayland does not say which program
has the focus, so it declares it cannot tell (the plan then refuses overwrite). Text goes out in
chunks, the stop token checked between them. Monitors come from sway's IPC (`swaymsg -t
get_outputs`), so for now the backend serves sway and says so on other wlroots desktops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence

from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor
from holodesk.automation.errors import ActionError, DesktopRefused
from holodesk.automation.input.backend import InputCapabilities
from holodesk.automation.input.injected import InjectedInput, keys_for_text
from holodesk.automation.input.plan import TYPED, InputTarget
from holodesk.automation.input.primitives import (
    ButtonClicks,
    ButtonDrag,
    KeyPresses,
    PastedText,
    PointerTo,
    Primitive,
    TypedText,
    WheelScroll,
)
from holodesk.automation.input.wlroots.pointer import WlrootsPointer
from holodesk.automation.input.wlroots.seat_keyboard import SeatKeyboard
from holodesk.automation.keys import normalize_key
from holodesk.automation.wayland.keysyms import key_keysym, text_keysyms
from holodesk.automation.wlroots.sway_outputs import sway_monitors

log = logging.getLogger(__name__)

WTYPE = "wtype"
WTYPE_PACKAGE = "wtype"  # Debian's package name
PASTE_KEYS = ("ctrl", "v")
SELECT_ALL_KEYS = ("ctrl", "a")
# Canonical modifier names to wtype's (-M/-m): held by the virtual keyboard's modifier state.
_WTYPE_MODIFIERS = {"ctrl": "ctrl", "alt": "alt", "shift": "shift", "super": "logo", "altgr": "altgr"}
# What the refusal of a character beyond U+FFFF says (a test looks for it).
BEYOND_BMP_WORDS = "characters beyond U+FFFF"
POINTER_NOT_WIRED = (
    "pointer actions (click, move, drag, scroll) are not available here: this wlroots keyboard backend "
    "was built without a virtual pointer"
)


class WtypeKeyboard:
    """The wlroots input backend (automation.input.backend.InputBackend): wtype, and `pointer` for pointer steps."""

    def __init__(
        self,
        *,
        injected: InjectedInput | None = None,
        environ: dict[str, str] | None = None,
        chunk_chars: int = 64,
        focus_settle_s: float = 0.05,
        pointer: WlrootsPointer | None = None,
        seat_keyboard: SeatKeyboard | None = None,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be at least 1")
        self._injected = injected if injected is not None else InjectedInput()
        self._environ = environ
        self.chunk_chars = chunk_chars
        self.focus_settle_s = focus_settle_s
        self.pointer = pointer
        self.seat_keyboard = seat_keyboard if seat_keyboard is not None else SeatKeyboard(environ=environ)
        self._layout: tuple[Monitor, ...] = ()  # the monitors while an action with pointer steps runs

    @property
    def capabilities(self) -> InputCapabilities:
        name = "wlroots virtual keyboard (wtype)" + (" and virtual pointer" if self.pointer else "")
        return InputCapabilities(name=name, knows_focused_program=False, refuses_corners=False)

    @property
    def injected(self) -> InjectedInput:
        return self._injected

    def close(self) -> None:
        """Release and destroy the virtual pointer and the seat keyboard; each wtype call's keyboard ends with it."""
        if self.pointer is not None:
            self.pointer.close()
        self.seat_keyboard.close()

    def monitors(self) -> tuple[Monitor, ...]:
        return sway_monitors(self._environ)

    def input_target(self, action: Action) -> InputTarget:
        return InputTarget(None, SELECT_ALL_KEYS, PASTE_KEYS, TYPED, self.focus_settle_s)

    # -- checks: nothing here sends input ----------------------------------------------------------

    def check(self, step: Primitive) -> None:
        if isinstance(step, PointerTo | ButtonClicks | ButtonDrag | WheelScroll):
            if self.pointer is None:
                raise ActionError(POINTER_NOT_WIRED)
            self.pointer.check(self.monitors())
            return
        if isinstance(step, PastedText):
            raise ActionError("pasting is not available on wlroots desktops yet: Holodesk types the text there")
        if isinstance(step, KeyPresses):
            _combination_arguments(step.hold, step.taps)
            if shutil.which(WTYPE) is None:
                raise ActionError(f"key presses on a wlroots desktop need wtype: sudo apt install {WTYPE_PACKAGE}")
        elif isinstance(step, TypedText):
            text_keysyms(step.text)  # ActionError naming a character no key event can carry
            _refuse_beyond_bmp(step.text)
        self.seat_keyboard.open()

    # -- performing --------------------------------------------------------------------------------

    @contextlib.contextmanager
    def acting(self, action: Action, steps: tuple[Primitive, ...]) -> Iterator[None]:
        # Every wtype call opens and closes its own virtual keyboard; the pointer (opened by check) is
        # the run's. The monitors are read once per action, for the pointer's motions.
        pointing = any(isinstance(step, PointerTo | ButtonClicks | ButtonDrag | WheelScroll) for step in steps)
        self._layout = self.monitors() if pointing else ()
        yield

    def perform(self, step: Primitive, cancel: CancelToken) -> str:
        if isinstance(step, PointerTo | ButtonClicks | ButtonDrag | WheelScroll):
            return self._point(step, cancel)
        if isinstance(step, TypedText):
            for start in range(0, len(step.text), self.chunk_chars):
                cancel.raise_if_cancelled()
                chunk = step.text[start : start + self.chunk_chars]
                with self._injected.holding(keys_for_text(chunk)):
                    self.seat_keyboard.type_text(chunk, cancel)
            return ""
        if isinstance(step, KeyPresses):
            cancel.raise_if_cancelled()
            with self._injected.holding(normalize_key(key) for key in step.keys):
                self._wtype(_combination_arguments(step.hold, step.taps))
            return ""
        raise AssertionError(f"check refuses {type(step).__name__} before anything is performed")

    def _point(self, step: PointerTo | ButtonClicks | ButtonDrag | WheelScroll, cancel: CancelToken) -> str:
        pointer = self.pointer
        assert pointer is not None and self._layout, "check refuses pointer steps without a pointer"
        cancel.raise_if_cancelled()
        if isinstance(step, PointerTo):
            pointer.move(step.at, self._layout)
        elif isinstance(step, ButtonClicks):
            pointer.click(step.button, step.count, cancel)
        elif isinstance(step, ButtonDrag):
            pointer.drag(step.button, step.end, self._layout, cancel)
        else:
            pointer.scroll(step.direction, step.notches, cancel)
        return ""

    def _wtype(self, arguments: Sequence[str]) -> None:
        # Shift first: the first key of a new virtual keyboard can be lost (see the module docstring).
        command = [WTYPE, "-k", "Shift_L", *arguments]
        env = dict(os.environ if self._environ is None else self._environ)
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DesktopRefused(f"wtype: {exc}") from exc
        if done.returncode != 0:
            # e.g. "Compositor does not support the virtual keyboard protocol" (GNOME, KDE)
            raise DesktopRefused(f"wtype failed: {done.stderr.strip() or f'exit status {done.returncode}'}")
        log.info("sent through wtype: %d arguments", len(arguments))


def _refuse_beyond_bmp(text: str) -> None:
    """ActionError naming the first character beyond U+FFFF (an emoji): Chromium on Wayland reads its key as
    another character (👍, U+1F44D, arrived as U+F44D, the step reported done), and Holodesk does not paste
    on wlroots desktops yet, so it cannot be typed exactly in every program."""
    for character in text:
        if ord(character) > 0xFFFF:
            raise ActionError(
                f"{character!r} (U+{ord(character):X}) cannot be typed exactly on a wlroots desktop: "
                f"{BEYOND_BMP_WORDS} (emoji among them) reach some programs as other characters (Chromium read "
                "U+1F44D as U+F44D), and Holodesk does not paste there yet"
            )


def _combination_arguments(hold: Sequence[str], taps: Sequence[str]) -> list[str]:
    """wtype's arguments holding `hold` (modifiers only) around `taps`; ActionError for others."""
    arguments: list[str] = []
    held = [normalize_key(key) for key in hold]
    for key in held:
        if key not in _WTYPE_MODIFIERS:
            raise ActionError(f"holding {key!r} is not available on wlroots desktops yet: only modifiers are held")
        arguments += ["-M", _WTYPE_MODIFIERS[key]]
    for key in taps:
        canonical = normalize_key(key)
        if canonical in _WTYPE_MODIFIERS:
            arguments += ["-M", _WTYPE_MODIFIERS[canonical], "-m", _WTYPE_MODIFIERS[canonical]]
        else:
            arguments += ["-k", f"0x{key_keysym(canonical):x}"]  # libxkbcommon reads a keysym name "0x..."
    for key in reversed(held):
        arguments += ["-m", _WTYPE_MODIFIERS[key]]
    return arguments
