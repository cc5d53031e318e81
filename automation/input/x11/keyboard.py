"""Key presses and typing on X11 that mean the same on every keyboard layout, or are refused in words.

Every key is chosen by its X keysym, never by a US-keyboard table: a character's keysym (Latin-1
code points are keysyms; other characters are 0x01000000 + code point), a named key's keysym
(Return, Control_L, F5). The keysym is looked up in the layout group XKB says is active at the
moment of pressing (a `us,ru` user who switched to Russian has Cyrillic on the letter keys), at
level 1, or level 2 with Shift. A keysym the active group lacks is bound to a spare keycode (one
with no symbols), the technique xdotool uses; a modifier the layout lacks is refused, since a
spare keycode carries no modifier.

Bindings race the programs that read them: a program turns a key into a character with the keymap
it has when it reads the key, so a slow one (busy, stopped) reads keys sent on a spare keycode with
whatever that keycode carries by then. So a binding is only ever added while a text is typed, and
the text's characters are all bound before its first key (a text needing more spare keycodes than
there are goes through the clipboard). Bindings stay for the next action. One is cleared or replaced
(the least recently used) only once every program that was sent keys on it showed it read them, by
answering a _NET_WM_PING sent after them, or is gone (automation.input.x11.unread). After each text
or key combination with keys on spare keycodes, the program is asked at once: when it does not
answer in time, or takes no pings at all (xterm), the result says so (KeysSent.unconfirmed) and the
step says the text was sent, not typed. Bindings that cannot be given back stay bound past the
run's end; a text that would need to replace one goes through the clipboard instead. A marker on
disk names what is bound (automation.held_input), so a killed run's bindings are cleared by the
next start. Caps Lock is unlocked while text is typed and locked again after. Events go through
XTEST, so they look like a real keyboard's to every program, terminals included.

A keymap change also races a program that applies it late. kitty (GLFW's X11 code) only marks its
keymap stale on XkbMapNotify and compiles it at the next key or state event it handles, taking the
modifier state the server has at that moment, not the one the key was sent with: when it read our
first key while Shift was already down for a later one, `a/b > c` arrived as `A/b > c`. So when the
keymap differs from the one the focused program was last proven to have applied (our own binding,
or the user's layout change), a text whose unshifted keys come before its first Shift waits after
them, before Shift, until the program answered a ping: it has then compiled the keymap with those
keys' state, and every later Shift reaches it as a state event in order. A program that does not
take pings gets no settle time here (xterm, which applies a change when told of it, would pay a
second for nothing in every such text); one that takes them and does not answer, the ping's timeout.

Also here: the WM_CLASS of the window with the keyboard focus (or under a point), which decides
the paste key and whether select-all can be honoured.

python-xlib (a pyautogui dependency on Linux) is imported lazily: this module imports everywhere.
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any

from holodesk.automation.cancel import CancelToken
from holodesk.automation.errors import ActionError, AutomationError, Cancelled, ExecutionError
from holodesk.automation.held_input import HeldInputMarker, RemappedKeysMarker
from holodesk.automation.input.x11 import xkb
from holodesk.automation.input.x11.unread import (
    PING_TIMEOUT_S,
    UnreadKeys,
    first_below,
    focused_reader,
    ping_focused_window,
)
from holodesk.automation.keys import SHORTCUT_MODIFIERS

XK_RETURN = 0xFF0D
XK_TAB = 0xFF09
XK_SHIFT_L = 0xFFE1
XK_CAPS_LOCK = 0xFFE5
UNICODE_KEYSYM_OFFSET = 0x01000000


# Canonical key names (automation.keys) and their keysyms. None: no X key (fn never reaches the OS).
KEY_KEYSYMS: dict[str, int | None] = {
    "ctrl": 0xFFE3, "alt": 0xFFE9, "shift": 0xFFE1, "super": 0xFFEB, "altgr": 0xFE03, "fn": None,
    "enter": 0xFF0D, "esc": 0xFF1B, "tab": 0xFF09, "space": 0x20, "backspace": 0xFF08, "delete": 0xFFFF,
    "insert": 0xFF63, "up": 0xFF52, "down": 0xFF54, "left": 0xFF51, "right": 0xFF53, "home": 0xFF50,
    "end": 0xFF57, "pageup": 0xFF55, "pagedown": 0xFF56, "capslock": 0xFFE5, "numlock": 0xFF7F,
    "scrolllock": 0xFF14, "printscreen": 0xFF61, "pause": 0xFF13, "menu": 0xFF67,
    "volumeup": 0x1008FF13, "volumedown": 0x1008FF11, "volumemute": 0x1008FF12,
    "playpause": 0x1008FF14, "nexttrack": 0x1008FF17, "prevtrack": 0x1008FF16,
    **{f"f{n}": 0xFFBE + n - 1 for n in range(1, 25)},
}  # fmt: skip
# Modifiers act through the server's modifier map, which a spare keycode is not in.
_MODIFIER_KEYS = frozenset({"ctrl", "alt", "shift", "super", "altgr"})
# Second choices for a modifier, when the layout has no left-hand key for it.
_MODIFIER_ALTERNATIVES = {0xFFE3: (0xFFE4,), 0xFFE9: (0xFFEA, 0xFFE7), 0xFFE1: (0xFFE2,), 0xFFEB: (0xFFEC,)}


class TypingUnavailable(ExecutionError):
    """This display cannot take these key events (no XTEST, or too few spare keycodes)."""


class LayoutChanged(AutomationError):
    """The layout group changed while keys were sent: what arrived may be wrong."""


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


def key_keysym(key: str) -> int:
    """The keysym of a canonical key name (a named key, or one character); ActionError when X has none."""
    if key in KEY_KEYSYMS:
        keysym = KEY_KEYSYMS[key]
        if keysym is None:
            raise ActionError(f"the key {key!r} is handled by the keyboard itself and cannot be pressed")
        return keysym
    if len(key) == 1:
        return keysym_for(key)
    raise ActionError(f"unknown key name {key!r}")


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
    """One press: a keycode, with Shift or not. `bound` when the keycode is a spare one bound by us."""

    keycode: int
    shift: bool
    bound: bool


class Keymap:
    """A snapshot of the core keymap read for one layout group: keysym -> (keycode, Shift), spare keycodes.

    The core keymap lists group 1 levels 1-2, then group 2 levels 1-2; a key with one group repeats
    it (XKB wraps the group). Groups 3 and 4 are not in that prefix: with one of them active, only
    keys that have a single group count as present, everything else goes on a spare keycode.
    `in_other_group` finds a keysym at level 1 of group 1 or 2 when that is not the active group.
    """

    def __init__(self, first_keycode: int, rows: list[list[int]], group: int = 0) -> None:
        self.first_keycode = first_keycode
        self.group = group
        self._rows = rows
        self._direct: dict[int, tuple[int, bool]] = {}
        self._elsewhere: dict[int, list[tuple[int, int]]] = {}  # keysym -> (keycode, group), group 1 first
        self.spare: list[int] = []
        for offset, syms in enumerate(rows):
            keycode = first_keycode + offset
            if not any(syms):
                self.spare.append(keycode)
                continue
            pair = _group_pair(syms, group)
            for level, keysym in enumerate(pair):
                if keysym and keysym not in self._direct:
                    self._direct[keysym] = (keycode, level == 1)
            # A one-symbol letter key types its capital with Shift (the core protocol's rule).
            if pair[0] and not pair[1] and ord("a") <= pair[0] <= ord("z"):
                self._direct.setdefault(pair[0] - 0x20, (keycode, True))
            for other in (0, 1):
                # Only a group the key really has: a one-group key's group 2 columns are empty or repeat group 1.
                level_one = syms[2 * other] if len(syms) > 2 * other else 0
                if other != group and level_one and (other == 0 or syms[2:4] != syms[0:2]):
                    self._elsewhere.setdefault(level_one, []).append((keycode, other))
        for keys in self._elsewhere.values():
            keys.sort(key=lambda entry: entry[1])
        # xdotool's habit: spare keycodes from the top, far from the keys people press.
        self.spare.reverse()

    def direct(self, keysym: int) -> tuple[int, bool] | None:
        return self._direct.get(keysym)

    def in_other_group(self, keysym: int, skip: Collection[int] = ()) -> tuple[int, int] | None:
        """A keycode (not in `skip`) with `keysym` at level 1 of a group other than the active one, and that group.

        Group 1 before group 2, as toolkits look for a shortcut's letter in the first Latin group.
        """
        return next(((code, other) for code, other in self._elsewhere.get(keysym, ()) if code not in skip), None)

    @property
    def signature(self) -> tuple[tuple[int, ...], ...]:
        """The keymap's rows, comparable: equal for the same keysyms on the same keycodes."""
        return tuple(tuple(row) for row in self._rows)

    def first_keysym(self, keycode: int) -> int:
        offset = keycode - self.first_keycode
        if 0 <= offset < len(self._rows) and self._rows[offset]:
            return self._rows[offset][0]
        return 0


def _group_pair(syms: list[int], group: int) -> tuple[int, int]:
    """Levels 1 and 2 of `group` in a core keymap row (group 1's when the key has fewer groups)."""
    first = (syms[0] if syms else 0, syms[1] if len(syms) > 1 else 0)
    if group == 0:
        return first
    second = (syms[2] if len(syms) > 2 else 0, syms[3] if len(syms) > 3 else 0)
    if group == 1:
        return second if any(second) else first
    # Group 3 or 4: trust only keys whose first two groups agree (a one-group key, wrapped).
    return first if first == second else (0, 0)


@dataclass(frozen=True, slots=True)
class KeysSent:
    """What went out: `presses` key presses in layout group `group` (from 0), `bound` of them on spare keycodes.

    `unconfirmed`: why the program the keys went to could not be shown to have read those on spare
    keycodes ("" when it showed it did, or none was on one): what it received is then not known.
    """

    presses: int
    bound: int
    group: int
    keys: str = ""  # the combination in words, for key presses (not for typed text)
    unconfirmed: str = ""

    def describe(self) -> str:
        spare = f", {self.bound} on temporarily bound keys" if self.bound else ""
        keys = f"{self.keys}: " if self.keys else ""
        return f"{keys}{self.presses} key presses in layout group {self.group + 1}{spare}"


class X11Typer:
    """Sends key presses and text to the focused window through XTEST on one X display connection.

    `on_keys` is told the canonical names of keys about to be pressed (the input backend's injected-key
    log, so the kill switch does not mistake them for the user's). One action at a time.
    """

    def __init__(
        self,
        display_name: str | None = None,
        *,
        key_interval_s: float = 0.0,
        on_keys: Callable[[list[str]], None] | None = None,
        reserved: Callable[[], frozenset[str]] | None = None,
        held_marker: HeldInputMarker | None = None,
        remapped_marker: RemappedKeysMarker | None = None,
        ping_timeout_s: float = PING_TIMEOUT_S,
    ) -> None:
        self.display_name = display_name
        # Characters always typed on a spare keycode, never on the key the user presses for them
        # (the kill switch's stop key): the user's press then cannot merge with ours on one key.
        self.reserved = reserved
        self.key_interval_s = key_interval_s
        self.on_keys = on_keys
        self.held_marker = held_marker if held_marker is not None else HeldInputMarker(display=display_name)
        self.remapped_marker = (
            remapped_marker if remapped_marker is not None else RemappedKeysMarker(display=display_name)
        )
        self.ping_timeout_s = ping_timeout_s
        # Which bound keycodes some program may still read keys on (automation.input.x11.unread).
        self.unread = UnreadKeys(display_name, ping_timeout_s)
        self._display: Any = None
        self._lock = threading.RLock()
        self._bound: OrderedDict[int, int] = OrderedDict()  # keysym -> spare keycode, least recently used first
        self._atexit_registered = False
        # (keymap, focused window) for which that window was proven to have applied the keymap before
        # a Shift of ours reached it (module docstring); None: not proven for any.
        self._applied: tuple[tuple[tuple[int, ...], ...], int] | None = None

    # -- connection and keymap -----------------------------------------------------------------

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

    def close(self) -> str:
        """Clear every binding no program may still read keys on, and disconnect; what stays bound, in
        words ("" when nothing). What stays is kept (and named in the marker) for a later call."""
        with self._lock:
            try:
                return self.release_bindings()
            finally:
                if self._display is not None:
                    self._display.close()
                    self._display = None

    def group(self) -> int:
        """The active layout group, counted from 0."""

        try:
            return xkb.read_state(self._open()).group
        except xkb.XkbUnavailable:
            return 0  # without XKB there is only the core keymap's first group

    def keymap(self) -> Keymap:
        """The keymap as the server has it now, for the active group (read afresh each time)."""
        display = self._open()
        first = display.display.info.min_keycode
        count = display.display.info.max_keycode - first + 1
        rows = [list(row) for row in display.get_keyboard_mapping(first, count)]
        return Keymap(first, rows, self.group())

    def _spare_capacity(self, keymap: Keymap) -> int:
        return len(keymap.spare) + sum(1 for keysym, code in self._bound.items() if keymap.first_keysym(code) == keysym)

    # -- planning: nothing here sends a key ----------------------------------------------------

    def _reserved_keysyms(self) -> frozenset[int]:
        names = self.reserved() if self.reserved else frozenset()
        return frozenset(keysym_for(c) for c in names if len(c) == 1)

    def _needs_binding(self, keysyms: Sequence[int], keymap: Keymap, forced: frozenset[int]) -> list[int]:
        """The keysyms (in order, once each) that must be on a bound spare keycode."""
        needed: list[int] = []
        for keysym in keysyms:
            if keysym in needed:
                continue
            if keysym in forced or keymap.direct(keysym) is None or keysym in self._bound:
                needed.append(keysym)
        return needed

    def check(self, text: str) -> None:
        """Raise ActionError for text no key can type, TypingUnavailable when it cannot be typed here."""
        bad = untypable_characters(text)
        if bad:
            shown = ", ".join(f"U+{ord(c):04X}" for c in bad)
            raise ActionError(f"the text holds control characters that cannot be typed: {shown}")
        with self._lock:
            keymap = self.keymap()
            self._check_capacity([keysym_for(c) for c in text], keymap, self._reserved_keysyms(), "the text")
            if keymap.direct(XK_SHIFT_L) is None:
                raise TypingUnavailable("the keymap has no Shift_L key")

    def _check_capacity(self, keysyms: Sequence[int], keymap: Keymap, forced: frozenset[int], what: str) -> None:
        needed = self._needs_binding(keysyms, keymap, forced)
        capacity = self._spare_capacity(keymap)
        if len(needed) > capacity:
            raise TypingUnavailable(
                f"{what} needs {len(needed)} keys that layout group {keymap.group + 1} lacks, "
                f"more than the {capacity} spare keycodes"
            )

    def active_group_has(self, key: str) -> bool:
        """True when the active layout group has `key` without Shift on a real key (not a spare keycode).

        A program may read a shortcut only by the active group's symbols: kitty with Russian active
        took ctrl+shift+v on the key that has v in group 1 as ctrl+shift+м and sent the program in it
        `ESC[1084;6u`.
        """
        with self._lock:
            keysym = key_keysym(key)
            return _level_one(self.keymap(), keysym) is not None and keysym not in self._bound

    def check_keys(self, keys: Sequence[str]) -> None:
        """Raise ActionError for a key that cannot be pressed here (named in words), before any is pressed."""
        with self._lock:
            self._resolve_keys(keys, self.keymap())

    def _resolve_keys(self, keys: Sequence[str], keymap: Keymap, *, shortcut: bool | None = None) -> list[int]:
        """The keysyms of `keys`, each a modifier present on the layout or a key that can be pressed.

        `shortcut`: whether the keys go with ctrl, alt or super held (by default: whether `keys` hold one).
        """
        if shortcut is None:
            shortcut = _is_shortcut(keys)
        keysyms: list[int] = []
        for key in keys:
            keysym = key_keysym(key)
            if key in _MODIFIER_KEYS:
                found = next(
                    (k for k in (keysym, *_MODIFIER_ALTERNATIVES.get(keysym, ())) if keymap.direct(k) is not None),
                    None,
                )
                if found is None:
                    raise ActionError(
                        f"the keyboard layout in use (group {keymap.group + 1}) has no {key!r} key, "
                        "so it cannot be pressed"
                    )
                keysym = found
            keysyms.append(keysym)
        # A key at level 2 would need Shift, which changes the combination: it goes on a spare keycode,
        # unless a shortcut finds it on a real key of another group.
        missing = [k for k in keysyms if self._real_key(k, keymap, shortcut) is None]
        if len(self._needs_binding(missing, keymap, frozenset(missing))) > self._spare_capacity(keymap):
            raise ActionError(
                f"the keys {'+'.join(keys)} are not on layout group {keymap.group + 1} and no spare keycode is free"
            )
        return keysyms

    # -- bindings ----------------------------------------------------------------------------

    def _bind(self, keysyms: Sequence[int], keymap: Keymap) -> dict[int, int]:
        """Spare keycodes carrying each of `keysyms`, binding the missing ones (never replacing one in use now)."""
        display = self._open()
        wanted = list(dict.fromkeys(keysyms))
        # Bindings someone else changed since are not ours any more.
        for keysym, code in list(self._bound.items()):
            if keymap.first_keysym(code) != keysym:
                del self._bound[keysym]
                self.unread.forget([code])
        new = [k for k in wanted if k not in self._bound]
        free = [code for code in keymap.spare if code not in self._bound.values()]
        evictable = [k for k in self._bound if k not in wanted]
        if len(new) > len(free) + len(evictable):
            available = len(free) + len(evictable)
            raise TypingUnavailable(f"{len(new)} keys need a spare keycode and only {available} are free")
        if len(new) > len(free):
            # Replacing a binding: every program sent keys on it must have shown it read them first.
            pending = self.unread.pending([self._bound[k] for k in evictable])
            replaceable = [k for k in evictable if self._bound[k] not in pending]
            if len(new) > len(free) + len(replaceable):
                readers = ", ".join(self.unread.readers(pending))
                raise TypingUnavailable(
                    f"{len(new)} keys need a spare keycode and only {len(free) + len(replaceable)} are free: "
                    f"the others carry keys {readers} has not been shown to have read"
                )
            for keysym in replaceable[: len(new) - len(free)]:
                free.append(self._bound.pop(keysym))
        for keysym, code in zip(new, free, strict=False):
            display.change_keyboard_mapping(code, [(keysym, keysym)])
            self._bound[keysym] = code
        for keysym in wanted:
            self._bound.move_to_end(keysym)
        if new:
            display.sync()
            if not self._atexit_registered:
                atexit.register(self.close)
                self._atexit_registered = True
            # Before any key is sent with them; raises (nothing typed) when the marker cannot be written.
            self.remapped_marker.record(dict((code, keysym) for keysym, code in self._bound.items()))
        return {keysym: self._bound[keysym] for keysym in wanted}

    def release_bindings(self) -> str:
        """Clear every spare keycode bound here that no program may still read keys on (each is asked,
        automation.input.x11.unread); the rest stay bound and named in the marker. What stays, in words."""
        with self._lock:
            if not self._bound:
                self.remapped_marker.record({})
                return ""
            try:
                display = self._open()
                pending = self.unread.pending(list(self._bound.values()))
                first = display.display.info.min_keycode
                count = display.display.info.max_keycode - first + 1
                rows = display.get_keyboard_mapping(first, count)
                for keysym, code in list(self._bound.items()):
                    if code in pending:
                        continue
                    if rows[code - first] and rows[code - first][0] == keysym:  # still ours
                        display.change_keyboard_mapping(code, [(0, 0)])
                    del self._bound[keysym]
                    self.unread.forget([code])
                display.sync()
            except Exception:  # the connection is gone: the marker stays for the next start to repair
                self._display = None
                self._bound.clear()
                return "the X connection was lost: the next start clears the temporarily bound keycodes"
            self.remapped_marker.record({code: keysym for keysym, code in self._bound.items()})
            if not self._bound:
                return ""
            readers = ", ".join(self.unread.readers(pending))
            return (
                f"{len(self._bound)} temporarily bound keycodes stay bound: {readers} may still read keys "
                "sent on them (cleared once it shows it read them, or at the next start)"
            )

    def _focused_window(self) -> int:
        """The window with the keyboard focus (0 when it follows the pointer or is nowhere)."""
        focus = self._open().get_input_focus().focus
        return int(getattr(focus, "id", 0))

    def _confirm_read(self, keycodes: set[int], send: Callable[[], KeysSent]) -> KeysSent:
        """`send` keys; those on bound `keycodes` are noted for the program they went to, which is then
        asked (a ping) whether it read them. The result says when that could not be confirmed."""
        if not keycodes:
            return send()
        reader = focused_reader(self._open())
        self.unread.sent(reader, keycodes)  # before the first key: a stop part-way leaves them noted
        sent = send()
        why = self.unread.confirm(reader)
        return replace(sent, unconfirmed=why) if why else sent

    # -- sending -------------------------------------------------------------------------------

    def type_text(self, text: str, cancel: CancelToken) -> KeysSent:
        """Type `text` exactly, or raise before the first key (ActionError, TypingUnavailable).

        Stops between characters when `cancel` is set (raising Cancelled); Shift is released and
        Caps Lock restored in any case. LayoutChanged when the user switched the layout group
        while the keys went out.
        """
        self.check(text)
        with self._lock:
            keymap = self.keymap()
            forced = self._reserved_keysyms()
            keysyms = [keysym_for(c) for c in text]
            bound = self._bind(self._needs_binding(keysyms, keymap, forced), keymap)
            strokes: list[tuple[str, KeyStroke]] = []
            for character, keysym in zip(text, keysyms, strict=True):
                if keysym in bound:
                    strokes.append((character, KeyStroke(bound[keysym], False, True)))
                else:
                    entry = keymap.direct(keysym)
                    if entry is None:  # cannot happen after _needs_binding; never send keycode 0 (X hangs)
                        raise TypingUnavailable(f"no key types {character!r} on layout group {keymap.group + 1}")
                    strokes.append((character, KeyStroke(entry[0], entry[1], False)))
            shift_entry = keymap.direct(XK_SHIFT_L)
            assert shift_entry is not None  # check() said so
            applied = (self.keymap().signature if bound else keymap.signature, self._focused_window())
            fence = applied != self._applied
            on_bound = {stroke.keycode for _, stroke in strokes if stroke.bound}
            try:
                sent = self._confirm_read(
                    on_bound,
                    lambda: self._send_strokes(strokes, shift_entry[0], keymap.group, forced, cancel, fence=fence),
                )
                if fence and any(stroke.shift for _, stroke in strokes):
                    self._applied = applied  # the fence ran, or Shift came first: its state event is in order
                return sent
            except Cancelled:
                self.release_bindings()  # the run stops: leave the keymap as it was
                raise

    def _send_strokes(
        self,
        strokes: list[tuple[str, KeyStroke]],
        shift_keycode: int,
        group: int,
        forced: frozenset[int],
        cancel: CancelToken,
        *,
        fence: bool = False,
    ) -> KeysSent:
        """Send `strokes`; with `fence`, wait for the focused program after the keys before the first
        Shift (module docstring)."""
        from Xlib import X
        from Xlib.ext import xtest

        display = self._open()
        state = xkb.read_state(display)
        shift_down = False
        keycodes = {shift_keycode, *(stroke.keycode for _, stroke in strokes)}
        with self.held_marker.holding(keycodes=keycodes):
            if state.caps_locked:
                xkb.lock(display, unlock_mods=xkb.LOCK_MASK)  # a locked Caps Lock would change letters' case
            try:
                for index, (character, stroke) in enumerate(strokes):
                    cancel.raise_if_cancelled()
                    if fence and stroke.shift and index:
                        # It has read the keys before, with no Shift down. No settle time where no
                        # answer comes: the programs seen compiling late (GLFW's) answer pings.
                        ping_focused_window(self.display_name, self.ping_timeout_s)
                        fence = False
                    if stroke.shift != shift_down:
                        if stroke.shift and self.on_keys is not None:
                            self.on_keys(["shift"])
                        xtest.fake_input(display, X.KeyPress if stroke.shift else X.KeyRelease, shift_keycode)
                        shift_down = stroke.shift
                    # A reserved character goes out on a spare keycode, which listeners do not read
                    # as that character (pynput reports an unknown key): no press to note for it.
                    if self.on_keys is not None and keysym_for(character) not in forced:
                        self.on_keys([_key_name(character)])
                    xtest.fake_input(display, X.KeyPress, stroke.keycode)
                    xtest.fake_input(display, X.KeyRelease, stroke.keycode)
                    display.sync()
                    if self.key_interval_s:
                        time.sleep(self.key_interval_s)
            finally:
                self._finish(display, [shift_keycode] if shift_down else [], state.caps_locked)
        return self._report(len(strokes), sum(stroke.bound for _, stroke in strokes), group)

    def press(self, keys: Sequence[str], cancel: CancelToken, *, repeat: int = 1) -> KeysSent:
        """Press `keys` together (in order, released in reverse); with `repeat`, the last key is tapped that often."""
        return self.hold_and_tap(keys[:-1], [keys[-1]] * repeat, cancel)

    def hold_and_tap(self, hold: Sequence[str], taps: Sequence[str], cancel: CancelToken) -> KeysSent:
        """Hold `hold` down, press and release each of `taps` in order, release `hold` in reverse.

        The caller notes these keys in the injected-key log (it knows how it groups them).
        """
        from Xlib import X
        from Xlib.ext import xtest

        with self._lock:
            keymap = self.keymap()
            shortcut = _is_shortcut(hold)
            hold_syms = self._resolve_keys(hold, keymap, shortcut=shortcut)
            tap_syms = self._resolve_keys(taps, keymap, shortcut=shortcut)
            codes, groups = self._keycodes_for_keys([*hold_syms, *tap_syms], keymap, shortcut)
            display = self._open()
            on_bound = {codes[k] for k in [*hold_syms, *tap_syms] if codes[k] in self._bound.values()}
            bound = sum(1 for k in [*hold_syms, *tap_syms] if codes[k] in on_bound)
            words = _combination_words(hold, taps, [*hold_syms, *tap_syms], groups)

            def send() -> KeysSent:
                pressed: list[int] = []
                with self.held_marker.holding(keycodes=set(codes.values())):
                    try:
                        for keysym in hold_syms:
                            cancel.raise_if_cancelled()
                            xtest.fake_input(display, X.KeyPress, codes[keysym])
                            pressed.append(codes[keysym])
                        for keysym in tap_syms:
                            cancel.raise_if_cancelled()
                            xtest.fake_input(display, X.KeyPress, codes[keysym])
                            xtest.fake_input(display, X.KeyRelease, codes[keysym])
                            display.sync()
                    finally:
                        self._finish(display, pressed, False)
                return self._report(len(hold) + len(taps), bound, keymap.group, words)

            return self._confirm_read(on_bound, send)

    def _real_key(self, keysym: int, keymap: Keymap, shortcut: bool) -> tuple[int, int | None] | None:
        """A real key that gives `keysym` without Shift for this press: its keycode, and its group when
        that is not the active one; None when it goes on a spare keycode.

        The active group's key first (unless `keysym` is bound: it stays on its binding). In a
        shortcut, a keysym the active group lacks is found on its key in another group: a user with
        Russian active presses the key that has v in group 1 for ctrl+v, and programs that read
        shortcuts by the physical key (Chromium) ignore a spare keycode.
        """
        keycode = _level_one(keymap, keysym)
        if keycode is not None and keysym not in self._bound:
            return keycode, None
        spare = set(self._bound.values())
        entry = keymap.direct(keysym)
        if shortcut and (entry is None or entry[0] in spare):  # the active group lacks it (a binding is no key)
            found = keymap.in_other_group(keysym, skip=spare)
            if found is not None:
                return found
        return None

    def _keycodes_for_keys(
        self, keysyms: Sequence[int], keymap: Keymap, shortcut: bool
    ) -> tuple[dict[int, int], dict[int, int]]:
        """keysym -> keycode (real keys where `_real_key` finds one, the rest bound to spare keycodes),
        and keysym -> group for the keys of another group than the active one."""
        codes: dict[int, int] = {}
        groups: dict[int, int] = {}
        missing: list[int] = []
        for keysym in keysyms:
            found = self._real_key(keysym, keymap, shortcut)
            if found is None:
                missing.append(keysym)
                continue
            codes[keysym] = found[0]
            if found[1] is not None:
                groups[keysym] = found[1]
        codes.update(self._bind(missing, keymap) if missing else {})
        return codes, groups

    def _finish(self, display: Any, release: Sequence[int], relock_caps: bool) -> None:
        """Release `release` (reverse order) and lock Caps Lock again if it was; never raises."""
        from Xlib import X
        from Xlib.ext import xtest

        try:
            for keycode in reversed(release):
                xtest.fake_input(display, X.KeyRelease, keycode)
            if relock_caps:
                xkb.lock(display, lock_mods=xkb.LOCK_MASK)
            display.sync()
        except Exception:  # the connection may be gone; the held-input marker is the last resort then
            self._display = None

    def _report(self, presses: int, bound: int, group: int, keys: str = "") -> KeysSent:
        now = self.group()
        if now != group:
            raise LayoutChanged(
                f"the keyboard layout group changed from {group + 1} to {now + 1} while keys were sent: "
                "what arrived may be wrong"
            )
        return KeysSent(presses, bound, group, keys)


def _level_one(keymap: Keymap, keysym: int) -> int | None:
    """The keycode that gives `keysym` without Shift in the active group, or None."""
    entry = keymap.direct(keysym)
    return entry[0] if entry is not None and not entry[1] else None


def _is_shortcut(keys: Sequence[str]) -> bool:
    """Whether `keys` hold a modifier that makes programs read a letter as a shortcut (ctrl, alt, super)."""
    return any(key in SHORTCUT_MODIFIERS for key in keys)


def _combination_words(hold: Sequence[str], taps: Sequence[str], keysyms: Sequence[int], groups: dict[int, int]) -> str:
    """The keys as sent, e.g. "ctrl+v (the key that has v in group 1)": a key of another group is named as such."""
    words: list[str] = []
    for key, keysym in zip([*hold, *taps], keysyms, strict=True):
        group = groups.get(keysym)
        words.append(f"{key} (the key that has {key} in group {group + 1})" if group is not None else key)
    held, tapped = words[: len(hold)], words[len(hold) :]
    return "+".join([*held, ", ".join(tapped)]) if held else ", ".join(tapped)


def _key_name(character: str) -> str:
    """The canonical key name for the injected-key log (a character as itself, lower-cased)."""
    return {"\n": "enter", "\t": "tab", " ": "space"}.get(character, character.lower())


# -- which program has the focus ------------------------------------------------------------------


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


def window_class_at(x: int, y: int, display_name: str | None = None) -> str:
    """The WM_CLASS class of the top-level window at root position (x, y), or "" when none names one."""
    try:
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
        child = root.translate_coords(root, x, y).child
        return _class_below(child) if hasattr(child, "id") and child.id else ""
    except xerror.XError:
        return ""
    finally:
        display.close()


def _class_below(window: Any, depth: int = 3) -> str:
    """The WM_CLASS class of `window` or of its first descendant (breadth first, `depth` levels) with one."""
    found = first_below(window, lambda w: bool(w.get_wm_class()), depth)
    return str(found.get_wm_class()[1]) if found is not None else ""
