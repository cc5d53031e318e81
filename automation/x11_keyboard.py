"""Types any Unicode text on X11 with key events that do not depend on the keyboard layout.

pyautogui presses one keycode per character chosen by a US-keyboard table, so on a German layout
every `/` comes out as `&`, and it cannot type non-ASCII at all. Here each character becomes its X
keysym (Latin-1 code points are keysyms; other characters are 0x01000000 + code point). A keysym
the current keymap already has on some key without a modifier, or with Shift, is typed with that
key; any other is bound to a spare keycode (one with no symbols) for the moment it is typed, the
technique xdotool uses, and the spare keycodes are cleared again afterwards. Events go through
XTEST, so they look like a real keyboard's to every application, terminals included.

Also here: the WM_CLASS of the window with the keyboard focus, which picks the paste key when text
has to go through the clipboard after all.

python-xlib (a pyautogui dependency on Linux) is imported lazily: this module imports everywhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import ActionError, ExecutionError

XK_RETURN = 0xFF0D
XK_TAB = 0xFF09
XK_SHIFT_L = 0xFFE1
UNICODE_KEYSYM_OFFSET = 0x01000000

# Clients re-read the keymap when told it changed; toolkits using xkbcommon fetch it with a round
# trip, so a remap needs a moment before the keys that use it, and before it is undone.
DEFAULT_REMAP_SETTLE_S = 0.05


class TypingUnavailable(ExecutionError):
    """This display cannot take layout-independent typing (no XTEST, or no spare keycode)."""


def keysym_for(character: str) -> int:
    """The X keysym that types `character`; ActionError for control characters other than \\n and \\t."""
    if len(character) != 1:
        raise ValueError(f"one character expected, got {character!r}")
    code = ord(character)
    if character == "\n":
        return XK_RETURN
    if character == "\t":
        return XK_TAB
    if code < 0x20 or 0x7F <= code <= 0x9F:
        raise ActionError(f"the control character U+{code:04X} cannot be typed as text")
    if code <= 0xFF:
        return code  # Latin-1: keysym equals code point
    return UNICODE_KEYSYM_OFFSET + code


def untypable_characters(text: str) -> list[str]:
    """The characters of `text` that no key event can type (control characters), in order, once each."""
    bad: list[str] = []
    for character in text:
        try:
            keysym_for(character)
        except ActionError:
            if character not in bad:
                bad.append(character)
    return bad


@dataclass(frozen=True, slots=True)
class KeyStroke:
    """One press: a keycode, with Shift or not. `remapped` when the keycode was bound for this text."""

    keycode: int
    shift: bool
    remapped: bool


class Keymap:
    """A snapshot of the display's core keymap: keysym -> (keycode, level), and the spare keycodes."""

    def __init__(self, first_keycode: int, rows: list[list[int]]) -> None:
        self.first_keycode = first_keycode
        self._direct: dict[int, tuple[int, bool]] = {}
        self.spare: list[int] = []
        for offset, syms in enumerate(rows):
            keycode = first_keycode + offset
            if not any(syms):
                self.spare.append(keycode)
                continue
            # Levels 0 (plain) and 1 (Shift) of the first group only: others need AltGr or a group switch.
            for level in (0, 1):
                if level < len(syms) and syms[level] and syms[level] not in self._direct:
                    self._direct[syms[level]] = (keycode, level == 1)
            # A one-symbol letter key types its capital with Shift (the core protocol's rule).
            if len(syms) > 1 and syms[0] and not syms[1] and ord("a") <= syms[0] <= ord("z"):
                self._direct.setdefault(syms[0] - 0x20, (keycode, True))
        # xdotool's habit: spare keycodes from the top, far from the keys people press.
        self.spare.reverse()

    def direct(self, keysym: int) -> tuple[int, bool] | None:
        return self._direct.get(keysym)


class X11Typer:
    """Types text into the focused window through XTEST on one X display connection.

    `on_keys` is told the canonical names of keys about to be pressed (the executor's injected-key
    log, so the kill switch does not mistake them for the user's). Not thread-safe: one text at a time.
    """

    def __init__(
        self,
        display_name: str | None = None,
        *,
        remap_settle_s: float = DEFAULT_REMAP_SETTLE_S,
        key_interval_s: float = 0.0,
        on_keys: Callable[[list[str]], None] | None = None,
        reserved: Callable[[], frozenset[str]] | None = None,
    ) -> None:
        self.display_name = display_name
        # Characters always typed on a spare keycode, never on the key the user presses for them
        # (the kill switch's stop key): the user's press then cannot merge with ours on one key.
        self.reserved = reserved
        self.remap_settle_s = remap_settle_s
        self.key_interval_s = key_interval_s
        self.on_keys = on_keys
        self._display: Any = None
        self._lock = threading.Lock()

    def _open(self) -> Any:
        if self._display is not None:
            return self._display
        try:
            from Xlib import display as xdisplay
            from Xlib import error as xerror
        except ImportError as exc:
            raise TypingUnavailable("python-xlib is not installed") from exc
        try:
            display = xdisplay.Display(self.display_name)
        except (xerror.DisplayError, OSError, KeyError) as exc:
            raise TypingUnavailable(f"cannot open the X display: {exc}") from exc
        if not display.has_extension("XTEST"):
            display.close()
            raise TypingUnavailable("the X server has no XTEST extension")
        self._display = display
        return display

    def close(self) -> None:
        if self._display is not None:
            self._display.close()
            self._display = None

    def keymap(self) -> Keymap:
        """The keymap as the server has it now (read afresh: the user may have switched layout)."""
        display = self._open()
        first = display.display.info.min_keycode
        count = display.display.info.max_keycode - first + 1
        return Keymap(first, [list(row) for row in display.get_keyboard_mapping(first, count)])

    def check(self, text: str) -> None:
        """Raise ActionError for text no key can type, TypingUnavailable when this display cannot type."""
        bad = untypable_characters(text)
        if bad:
            shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
            raise ActionError(f"the text holds control characters that cannot be typed: {shown}")
        keymap = self.keymap()
        needs_spare = any(keymap.direct(keysym_for(c)) is None for c in set(text))
        if needs_spare and not keymap.spare:
            raise TypingUnavailable("the keymap has no spare keycode to bind the text's characters to")
        if keymap.direct(XK_SHIFT_L) is None:
            raise TypingUnavailable("the keymap has no Shift_L key")

    def type_text(self, text: str, cancel: CancelToken) -> int:
        """Type `text`; returns how many characters needed a temporarily bound keycode.

        Stops between characters when `cancel` is set (raising Cancelled); Shift is released and
        every bound keycode cleared in any case.
        """
        self.check(text)
        with self._lock:
            return self._type(text, cancel)

    def _type(self, text: str, cancel: CancelToken) -> int:
        from Xlib import X
        from Xlib.ext import xtest

        display = self._open()
        keymap = self.keymap()
        shift_entry = keymap.direct(XK_SHIFT_L)
        assert shift_entry is not None  # check() said so
        shift_keycode = shift_entry[0]
        reserved = frozenset(keysym_for(c) for c in (self.reserved() if self.reserved else ()) if len(c) == 1)
        bound: dict[int, int] = {}  # keysym -> spare keycode, for the current batch
        used_spare: set[int] = set()
        remapped_count = 0
        shift_down = False

        def bind(batch: dict[int, int]) -> None:
            for keysym, keycode in batch.items():
                display.change_keyboard_mapping(keycode, [(keysym, keysym)])
            display.sync()
            if self.remap_settle_s:
                time.sleep(self.remap_settle_s)

        def set_shift(down: bool) -> None:
            nonlocal shift_down
            if down != shift_down:
                if down and self.on_keys is not None:
                    self.on_keys(["shift"])
                xtest.fake_input(display, X.KeyPress if down else X.KeyRelease, shift_keycode)
                shift_down = down

        try:
            plan = self._plan(text, keymap, reserved)
            for batch, strokes in plan:
                if batch:
                    bind(batch)
                    used_spare.update(batch.values())
                    bound.update(batch)
                for character, stroke in strokes:
                    cancel.raise_if_cancelled()
                    set_shift(stroke.shift)
                    # A reserved character goes out on a spare keycode, which listeners do not read
                    # as that character (pynput reports an unknown key): no press to note for it.
                    if self.on_keys is not None and keysym_for(character) not in reserved:
                        self.on_keys([_key_name(character)])
                    xtest.fake_input(display, X.KeyPress, stroke.keycode)
                    xtest.fake_input(display, X.KeyRelease, stroke.keycode)
                    display.sync()
                    remapped_count += stroke.remapped
                    if self.key_interval_s:
                        time.sleep(self.key_interval_s)
                if batch and self.remap_settle_s:
                    # Let the application read these keys before their keycodes mean something else.
                    time.sleep(self.remap_settle_s)
        finally:
            try:
                set_shift(False)
                for keycode in used_spare:
                    display.change_keyboard_mapping(keycode, [(0, 0)])
                display.sync()
            except Exception:  # the connection may be gone; nothing more can be released then
                self.close()
        return remapped_count

    @staticmethod
    def _plan(
        text: str, keymap: Keymap, reserved: frozenset[int] = frozenset()
    ) -> list[tuple[dict[int, int], list[tuple[str, KeyStroke]]]]:
        """Split the text into batches, each with the spare keycodes to bind before typing it."""
        plan: list[tuple[dict[int, int], list[tuple[str, KeyStroke]]]] = []
        batch: dict[int, int] = {}
        strokes: list[tuple[str, KeyStroke]] = []
        for character in text:
            keysym = keysym_for(character)
            direct = keymap.direct(keysym) if keysym not in reserved else None
            if direct is not None:
                strokes.append((character, KeyStroke(direct[0], direct[1], False)))
                continue
            if keysym not in batch:
                if len(batch) == len(keymap.spare):  # every spare keycode is taken: start a new batch
                    plan.append((batch, strokes))
                    batch, strokes = {}, []
                batch[keysym] = keymap.spare[len(batch)]
            strokes.append((character, KeyStroke(batch[keysym], False, True)))
        plan.append((batch, strokes))
        return plan


def _key_name(character: str) -> str:
    """The canonical key name for the injected-key log (a character as itself, lower-cased)."""
    return {"\n": "enter", "\t": "tab", " ": "space"}.get(character, character.lower())


def focused_window_class(display_name: str | None = None) -> str:
    """The WM_CLASS class of the window that receives typed keys, or "" when none names one.

    That is the focused window (or its nearest ancestor with a class); when the focus follows the
    pointer (PointerRoot, X's default without a window manager), the top-level window under the
    pointer (or the first of its descendants with a class, as a window manager's frame has none).
    """
    try:
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib import error as xerror
    except ImportError:
        return ""
    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError):
        return ""
    try:
        root = display.screen().root
        window = display.get_input_focus().focus
        follows_pointer = window == X.PointerRoot or (hasattr(window, "id") and window.id == root.id)
        if follows_pointer:
            under = root.query_pointer().child
            return _class_below(under) if hasattr(under, "id") and under.id else ""
        if not hasattr(window, "id"):
            return ""  # the focus is on nothing: keys go nowhere
        for _ in range(32):  # a bounded walk up the tree
            wm_class = window.get_wm_class()
            if wm_class:
                return str(wm_class[1])
            parent = window.query_tree().parent
            if not hasattr(parent, "id") or not parent.id or parent.id in (window.id, root.id):
                return ""
            window = parent
        return ""
    except xerror.XError:
        return ""
    finally:
        display.close()


def _class_below(window: Any, depth: int = 3) -> str:
    """The WM_CLASS class of `window` or of its first descendant (breadth first, `depth` levels) with one."""
    level = [window]
    for _ in range(depth + 1):
        following = []
        for candidate in level:
            wm_class = candidate.get_wm_class()
            if wm_class:
                return str(wm_class[1])
            following.extend(candidate.query_tree().children)
        level = following
    return ""
