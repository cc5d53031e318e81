"""The keymaps text is typed with on wlroots (automation/input/wlroots/text_keymap.py), compiled by libxkbcommon.

Each chunk's keymap must compile, put each of its characters alone on the key the chunk presses for
it, and use only keys that type characters on a US keyboard (Chromium on Wayland acts on others'
US meaning: a character on key 14 deleted the one before it; tests/automation/wlroots/
test_sway_typing_matrix.py shows it in the program).
"""

from __future__ import annotations

import ctypes
import ctypes.util

import pytest

from holodesk.automation.errors import ActionError
from holodesk.automation.input.wlroots.text_keymap import CHARACTER_KEYS, XKB_KEYCODE_OFFSET, text_chunks
from holodesk.automation.wayland.keysyms import char_keysym
from tests.automation.test_typing_layouts import TEXTS

# Keys a program reads as something other than a character on a US keyboard (linux/input-event-codes.h).
NOT_CHARACTER_KEYS = {1: "Esc", 14: "Backspace", 15: "Tab", 28: "Enter", 29: "Ctrl", 42: "Shift", 56: "Alt", 58: "Caps"}
XKB_KEYMAP_FORMAT_TEXT_V1 = 1


def key_keysyms(keymap_text: str, keycodes: set[int]) -> dict[int, list[int]]:
    """Each XKB keycode's first-level keysyms in `keymap_text`, as libxkbcommon compiles it (the oracle)."""
    lib = ctypes.CDLL(ctypes.util.find_library("xkbcommon") or "libxkbcommon.so.0")
    lib.xkb_context_new.restype = ctypes.c_void_p
    lib.xkb_keymap_new_from_string.restype = ctypes.c_void_p
    lib.xkb_keymap_new_from_string.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    lib.xkb_keymap_key_get_syms_by_level.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.c_uint32,
        ctypes.POINTER(ctypes.POINTER(ctypes.c_uint32)),
    ]
    lib.xkb_keymap_unref.argtypes = lib.xkb_context_unref.argtypes = [ctypes.c_void_p]
    context = lib.xkb_context_new(0)
    keymap = lib.xkb_keymap_new_from_string(context, keymap_text.encode(), XKB_KEYMAP_FORMAT_TEXT_V1, 0)
    assert keymap, "the keymap did not compile"
    syms = ctypes.POINTER(ctypes.c_uint32)()
    found = {}
    for keycode in keycodes:
        count = lib.xkb_keymap_key_get_syms_by_level(keymap, keycode, 0, 0, ctypes.byref(syms))
        found[keycode] = [int(syms[index]) for index in range(count)]
    lib.xkb_keymap_unref(keymap)
    lib.xkb_context_unref(context)
    return found


DISTINCT = "".join(chr(code) for code in range(0x410, 0x410 + 64)) + "abc"  # 67 distinct characters


@pytest.mark.parametrize("text", [*TEXTS.values(), DISTINCT, "aaaa"], ids=[*TEXTS, "67 distinct", "repeated"])
def test_each_chunk_types_its_characters_on_character_keys(text: str) -> None:
    chunks = text_chunks(text)
    assert "".join(chunk.text for chunk in chunks) == text
    for chunk in chunks:
        assert len(set(chunk.keys)) <= len(CHARACTER_KEYS) and len(chunk.keys) == len(chunk.text)
        assert not {NOT_CHARACTER_KEYS[key] for key in chunk.keys if key in NOT_CHARACTER_KEYS}
        assert set(chunk.keys) <= set(CHARACTER_KEYS)
        keys = key_keysyms(chunk.keymap, {key + XKB_KEYCODE_OFFSET for key in chunk.keys})
        for character, key in zip(chunk.text, chunk.keys, strict=True):
            assert keys[key + XKB_KEYCODE_OFFSET] == [char_keysym(character)], (character, key)
        assert len({char_keysym(c) for c in chunk.text}) == len(set(chunk.keys))  # one key per character


def test_more_distinct_characters_than_keys_split_into_chunks() -> None:
    chunks = text_chunks(DISTINCT)
    assert [len(chunk.text) for chunk in chunks] == [len(CHARACTER_KEYS), len(DISTINCT) - len(CHARACTER_KEYS)]


def test_a_control_character_is_refused_in_words() -> None:
    with pytest.raises(ActionError, match="U\\+0007 cannot be typed"):
        text_chunks("bell\a")
