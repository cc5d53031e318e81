"""Keymaps for typing text on a virtual keyboard: each character's keysym on a key programs treat as a character key.

A virtual keyboard's keymap is the sender's to choose, so a text can be typed on any layout by putting
its own keysyms on keys (what wtype does). Which keys matters: Chromium on Wayland takes the Windows
key code of a key whose character is not an ASCII letter or digit from the key's position on a US
keyboard, and acts on it. wtype numbers keys 1, 2, 3... in order of appearance, so a character that
landed on key 14 (Backspace's place) deleted the character before it, one on key 29 (left Ctrl's)
typed nothing: 'этих' arrived as 'эт', ' $HOME' as 'HOME', each step reported done (the sway typing
matrix, tests/automation/wlroots/test_sway_typing_matrix.py). Here every character goes on one of the
48 keys that type characters on a US keyboard (digits, letters, punctuation, space), so Chromium
derives only character key codes. A text with more distinct characters than that is split into
chunks, each with its own keymap.
"""

from __future__ import annotations

from dataclasses import dataclass

from holodesk.automation.wayland.keysyms import text_keysyms

# Linux input codes (linux/input-event-codes.h) of the keys that type characters on a US keyboard:
# 1-0 - = (2-13), q-p [ ] (16-27), a-l ; ' ` (30-41), \ (43), z-m , . / (44-53), space (57).
CHARACTER_KEYS: tuple[int, ...] = (*range(2, 14), *range(16, 28), *range(30, 42), 43, *range(44, 54), 57)
XKB_KEYCODE_OFFSET = 8  # an XKB keycode is the Linux input code + 8


@dataclass(frozen=True, slots=True)
class KeymapChunk:
    """A piece of text, the keymap that types it, and the Linux input code of each of its characters' keys."""

    text: str
    keymap: str
    keys: tuple[int, ...]


def text_chunks(text: str, most_keys: int = len(CHARACTER_KEYS)) -> list[KeymapChunk]:
    """`text` in order, as chunks of at most `most_keys` distinct characters each with its keymap;
    ActionError naming a character no key can type (a control character)."""
    if not 1 <= most_keys <= len(CHARACTER_KEYS):
        raise ValueError(f"most_keys must be 1 to {len(CHARACTER_KEYS)}, got {most_keys}")
    keysyms = text_keysyms(text)
    chunks: list[KeymapChunk] = []
    start = 0
    while start < len(text):
        places: dict[int, int] = {}  # keysym -> Linux input code of its key
        end = start
        while end < len(text) and (keysyms[end] in places or len(places) < most_keys):
            places.setdefault(keysyms[end], CHARACTER_KEYS[len(places)])
            end += 1
        chunks.append(
            KeymapChunk(text[start:end], _keymap(places), tuple(places[keysym] for keysym in keysyms[start:end]))
        )
        start = end
    return chunks


def _keymap(places: dict[int, int]) -> str:
    """An XKB keymap with each keysym alone on its key (no levels: no modifier is needed to type it)."""
    codes = "".join(f" <K{code}> = {code + XKB_KEYCODE_OFFSET};" for code in places.values())
    # Keysyms written as numbers: libxkbcommon reads a number above 9 as the keysym itself (all here are).
    symbols = "".join(f" key <K{code}> {{ [ 0x{keysym:x} ] }};" for keysym, code in places.items())
    return (
        "xkb_keymap {\n"
        f'xkb_keycodes "(unnamed)" {{ minimum = 8; maximum = 255;{codes} }};\n'
        'xkb_types "(unnamed)" { include "complete" };\n'
        'xkb_compatibility "(unnamed)" { include "complete" };\n'
        f'xkb_symbols "(unnamed)" {{{symbols} }};\n'
        "};\n"
    )
