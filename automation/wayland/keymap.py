"""Which keysyms the compositor can type: its keyboard keymap, searched the way mutter searches it.

Mutter types a portal NotifyKeyboardKeysym by looking for a key with that keysym in the keymap's
current layout only (meta-virtual-input-device-native.c, `pick_keycode_for_keyval_in_current_group`,
unchanged from mutter 43 to 49). A keysym no key has is dropped with nothing but a warning in
mutter's log ("No keycode found for keyval ... in current group"); one found on a level above 3 is
pressed without its modifiers, which types another character. So text is checked here first.

The keymap is the one the compositor gives every Wayland client (wl_keyboard.keymap, read with
pywayland); it is interpreted with libxkbcommon (through ctypes: the only Python binding builds from
source), the library mutter itself searches it with. Which layout is current is told only to the
client with the keyboard focus, so a keysym counts as typable only when every layout of the keymap
types it (exact for the usual one-layout keymap). For a shortcut whose letter some layout lacks
(ctrl+v with Russian active), `key_with` names the physical key that has it in the first layout
that does: pressed by keycode, programs read the letter from that key as they do for a user.

Mutter looks a keysym up again when it is released, in the layout current then, and presses the
level's modifier itself in between: a layout change between the press and the release (the next
window's layout, a user's switch) leaves that modifier counted as held, and from then on mutter
drops every press of it as a repeat, the user's own Shift key included (seen in this project's
tests: every capital typed lower case until mutter restarts). `keys_for` gives the keys to hold
instead wherever every layout agrees on them, so the text goes by keycode, each key released by
the code it was pressed by.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import mmap
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from holodesk.automation.errors import ExecutionError

XKB_KEYMAP_FORMAT_TEXT_V1 = 1
WL_SEAT_CAPABILITY_KEYBOARD = 2
SHIFT_L = 0xFFE1
ISO_LEVEL3_SHIFT = 0xFE03
# The modifier that reaches a key's second and third level (levels counted from 0 here).
LEVEL_MODIFIERS = {1: SHIFT_L, 2: ISO_LEVEL3_SHIFT}


class KeymapUnavailable(ExecutionError):
    """The compositor's keymap could not be read or understood."""


@functools.cache
def _libxkbcommon() -> Any:
    name = ctypes.util.find_library("xkbcommon") or "libxkbcommon.so.0"
    try:
        lib = ctypes.CDLL(name)
    except OSError as exc:
        raise KeymapUnavailable(f"libxkbcommon is not installed ({exc}): install libxkbcommon0") from exc
    lib.xkb_context_new.restype = ctypes.c_void_p
    lib.xkb_context_new.argtypes = [ctypes.c_int]
    lib.xkb_context_unref.argtypes = [ctypes.c_void_p]
    lib.xkb_keymap_new_from_string.restype = ctypes.c_void_p
    lib.xkb_keymap_new_from_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.xkb_keymap_unref.argtypes = [ctypes.c_void_p]
    for function in ("xkb_keymap_min_keycode", "xkb_keymap_max_keycode", "xkb_keymap_num_layouts"):
        getattr(lib, function).restype = ctypes.c_uint32
        getattr(lib, function).argtypes = [ctypes.c_void_p]
    lib.xkb_keymap_layout_get_name.restype = ctypes.c_char_p
    lib.xkb_keymap_layout_get_name.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.xkb_keymap_num_levels_for_key.restype = ctypes.c_uint32
    lib.xkb_keymap_num_levels_for_key.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32]
    lib.xkb_utf32_to_keysym.restype = ctypes.c_uint32
    lib.xkb_utf32_to_keysym.argtypes = [ctypes.c_uint32]
    lib.xkb_keymap_key_get_syms_by_level.restype = ctypes.c_int
    lib.xkb_keymap_key_get_syms_by_level.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_uint32)),
    ]
    return lib


@dataclass(frozen=True, slots=True)
class CompositorKeymap:
    """For each layout of the keymap, where mutter's virtual keyboard finds each keysym it types
    correctly (XKB keycode, level: 0 bare, 1 Shift, 2 AltGr), and the key that gives each keysym
    without a modifier."""

    layout_names: tuple[str, ...]
    placements_by_layout: tuple[Mapping[int, tuple[int, int]], ...]
    bare_keys_by_layout: tuple[Mapping[int, int], ...]

    @classmethod
    def from_text(cls, text: bytes) -> CompositorKeymap:
        """Compile an XKB keymap (text format v1) and apply mutter's lookup to every layout."""
        lib = _libxkbcommon()
        context = lib.xkb_context_new(0)
        if not context:
            raise KeymapUnavailable("libxkbcommon could not create a context")
        try:
            keymap = lib.xkb_keymap_new_from_string(context, text.rstrip(b"\0"), XKB_KEYMAP_FORMAT_TEXT_V1, 0)
            if not keymap:
                raise KeymapUnavailable("the compositor's keymap did not compile with libxkbcommon")
            try:
                return cls._search(lib, keymap)
            finally:
                lib.xkb_keymap_unref(keymap)
        finally:
            lib.xkb_context_unref(context)

    @classmethod
    def _search(cls, lib: Any, keymap: int) -> CompositorKeymap:
        first, last = lib.xkb_keymap_min_keycode(keymap), lib.xkb_keymap_max_keycode(keymap)
        names: list[str] = []
        placements: list[Mapping[int, tuple[int, int]]] = []
        bare_keys: list[Mapping[int, int]] = []
        syms = ctypes.POINTER(ctypes.c_uint32)()
        for layout in range(max(1, lib.xkb_keymap_num_layouts(keymap))):
            name = lib.xkb_keymap_layout_get_name(keymap, layout)
            names.append(name.decode("utf-8", "replace") if name else f"layout {layout + 1}")
            # keysym -> the level of its first key, in mutter's order: keycodes upwards (mutter stops
            # before the highest keycode), levels upwards within a key.
            first_place: dict[int, tuple[int, int]] = {}  # keysym -> (keycode, level)
            bare: dict[int, int] = {}  # keysym -> the first key giving it on level 1
            for keycode in range(first, last):
                for level in range(lib.xkb_keymap_num_levels_for_key(keymap, keycode, layout)):
                    count = lib.xkb_keymap_key_get_syms_by_level(keymap, keycode, layout, level, ctypes.byref(syms))
                    for index in range(count):
                        first_place.setdefault(int(syms[index]), (keycode, level))
                        if level == 0:
                            bare.setdefault(int(syms[index]), keycode)
            # Mutter adds Shift for level 2 and ISO_Level3_Shift for level 3 (when the layout has
            # them); any other level it presses bare, typing the key's first-level symbol instead.
            usable_levels = {0}
            if SHIFT_L in first_place:
                usable_levels.add(1)
            if ISO_LEVEL3_SHIFT in first_place:
                usable_levels.add(2)
            usable = {sym: place for sym, place in first_place.items() if place[1] in usable_levels}
            placements.append(MappingProxyType(usable))
            bare_keys.append(MappingProxyType(bare))
        return cls(tuple(names), tuple(placements), tuple(bare_keys))

    def keysym_for(self, character: str, unicode_keysym: int) -> int | None:
        """A keysym for `character` that every layout types, or None.

        Layouts name most characters by their legacy keysym (EuroSign 0x20AC, not U+20AC's
        0x010020AC), which mutter compares as a number, so both forms are tried.
        """
        for keysym in (unicode_keysym, legacy_keysym(character)):
            if keysym and self.types(keysym):
                return keysym
        return None

    def missing_from(self, keysym: int) -> list[str]:
        """The names of the layouts that cannot type `keysym` (empty when every one can)."""
        layouts = zip(self.layout_names, self.placements_by_layout, strict=True)
        return [name for name, placements in layouts if keysym not in placements]

    def types(self, keysym: int) -> bool:
        """True when every layout types `keysym`, so it arrives whichever layout is current."""
        return not self.missing_from(keysym)

    def keys_for(self, keysym: int) -> tuple[int, ...] | None:
        """The XKB keycodes to hold down in order to type `keysym` as mutter would (its level's
        modifier key, if any, then its own key), when every layout puts it on the same key and level
        with the same modifier key; None otherwise (then only mutter knows the active layout's)."""
        found = {self.keys_in(layout, keysym) for layout in range(len(self.layout_names))}
        return found.pop() if len(found) == 1 else None

    def keys_in(self, layout: int, keysym: int) -> tuple[int, ...] | None:
        """The XKB keycodes to hold down in order to type `keysym` in layout `layout` (from 0): its
        level's modifier key, if any, then its own key; None when that layout has no such keys."""
        place = self.placements_by_layout[layout].get(keysym)
        if place is None:
            return None
        keycode, level = place
        if level == 0:
            return (keycode,)
        modifier = self.bare_keys_by_layout[layout].get(LEVEL_MODIFIERS[level])
        return None if modifier is None else (modifier, keycode)

    def key_with(self, keysym: int) -> tuple[int, int] | None:
        """(XKB keycode, layout index from 0) of the key giving `keysym` without a modifier in the
        first layout that has one, or None when no layout does."""
        for layout, keys in enumerate(self.bare_keys_by_layout):
            if keysym in keys:
                return keys[keysym], layout
        return None


def legacy_keysym(character: str) -> int:
    """libxkbcommon's keysym for a character (a legacy one where X11 defined it), 0 if none."""
    return int(_libxkbcommon().xkb_utf32_to_keysym(ord(character)))


def read_keymap_text(display_name: str | None = None, timeout_s: float = 2.0) -> bytes:
    """The XKB keymap the compositor gives Wayland clients (wl_keyboard.keymap), as text.

    Waits up to `timeout_s` for the seat to have a keyboard: a headless compositor has one only
    once a virtual keyboard (the portal session's) has typed. Asking a seat without a keyboard for
    one is never done: mutter 43 was seen to exit on it.
    """
    try:
        from pywayland.client import Display
        from pywayland.protocol.wayland import WlSeat
    except ImportError as exc:
        raise KeymapUnavailable(f"pywayland is not installed ({exc}): reinstall Holodesk") from exc
    deadline = time.monotonic() + timeout_s
    while True:
        display = Display(display_name)
        try:
            display.connect()
        except Exception as exc:  # pywayland raises ValueError / its own errors
            raise KeymapUnavailable(f"cannot connect to the Wayland display: {exc}") from exc
        try:
            text = _keymap_from(display, WlSeat)
        finally:
            with contextlib.suppress(Exception):
                display.disconnect()
        if text is not None:
            return text
        if time.monotonic() >= deadline:
            raise KeymapUnavailable(
                "the desktop has no keyboard to read the layout of (the remote-interaction keyboard did not appear)"
            )
        time.sleep(0.05)


def _keymap_from(display: Any, seat_type: Any) -> bytes | None:
    registry = display.get_registry()
    seats: list[Any] = []

    def on_global(registry: Any, name: int, interface: str, version: int) -> None:
        if interface == "wl_seat" and not seats:
            seats.append(registry.bind(name, seat_type, min(version, 5)))

    registry.dispatcher["global"] = on_global
    display.roundtrip()
    if not seats:
        raise KeymapUnavailable("the Wayland compositor offers no seat (no keyboard or pointer)")
    capabilities: list[int] = []
    seats[0].dispatcher["capabilities"] = lambda _seat, value: capabilities.append(value)
    display.roundtrip()
    if not capabilities or not capabilities[-1] & WL_SEAT_CAPABILITY_KEYBOARD:
        return None
    keyboard = seats[0].get_keyboard()
    keymaps: list[bytes] = []
    failures: list[str] = []

    def on_keymap(_keyboard: Any, keymap_format: int, fd: int, size: int) -> None:
        try:
            if keymap_format != XKB_KEYMAP_FORMAT_TEXT_V1:
                failures.append(f"the compositor's keymap has format {keymap_format}, not XKB text")
                return
            with mmap.mmap(fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ) as mapped:
                keymaps.append(mapped[:size])
        finally:
            os.close(fd)

    keyboard.dispatcher["keymap"] = on_keymap
    display.roundtrip()
    with contextlib.suppress(Exception):
        keyboard.release()
    if failures:
        raise KeymapUnavailable(failures[0])
    if not keymaps:
        raise KeymapUnavailable("the compositor sent no keymap for its keyboard")
    return keymaps[0]


def compositor_keymap(display_name: str | None = None, timeout_s: float = 2.0) -> CompositorKeymap:
    """The compositor's keymap now (read afresh: the user may have changed layouts)."""
    return CompositorKeymap.from_text(read_keymap_text(display_name, timeout_s))
