"""X keysyms for canonical key names and for any Unicode character (the portal types by keysym).

The portal's NotifyKeyboardKeysym takes a keysym, and the compositor finds (or makes) a key for it,
so text needs no clipboard and no knowledge of the user's layout. Printable Latin-1 characters are
their own keysyms; every other character is 0x01000000 + its code point (the X11 Unicode keysyms).
"""

from __future__ import annotations

from holodesk.automation.errors import ActionError
from holodesk.automation.keys import normalize_key

_NAMED_KEYSYMS: dict[str, int] = {
    "ctrl": 0xFFE3,  # Control_L
    "alt": 0xFFE9,  # Alt_L
    "shift": 0xFFE1,  # Shift_L
    "super": 0xFFEB,  # Super_L
    "altgr": 0xFE03,  # ISO_Level3_Shift
    "enter": 0xFF0D,  # Return
    "esc": 0xFF1B,
    "tab": 0xFF09,
    "space": 0x0020,
    "backspace": 0xFF08,
    "delete": 0xFFFF,
    "insert": 0xFF63,
    "up": 0xFF52,
    "down": 0xFF54,
    "left": 0xFF51,
    "right": 0xFF53,
    "home": 0xFF50,
    "end": 0xFF57,
    "pageup": 0xFF55,
    "pagedown": 0xFF56,
    "capslock": 0xFFE5,
    "numlock": 0xFF7F,
    "scrolllock": 0xFF14,
    "printscreen": 0xFF61,
    "pause": 0xFF13,
    "menu": 0xFF67,
    "volumeup": 0x1008FF13,  # XF86AudioRaiseVolume
    "volumedown": 0x1008FF11,
    "volumemute": 0x1008FF12,
    "playpause": 0x1008FF14,  # XF86AudioPlay
    "nexttrack": 0x1008FF17,
    "prevtrack": 0x1008FF16,
    **{f"f{n}": 0xFFBE + n - 1 for n in range(1, 25)},  # F1 is 0xFFBE, F24 0xFFD5
}

_TEXT_CONTROL_KEYSYMS = {"\n": 0xFF0D, "\t": 0xFF09}


def key_keysym(key: str) -> int:
    """The keysym of a canonical (or aliased) key name; ActionError for keys no keysym presses."""
    canonical = normalize_key(key)
    if canonical == "fn":
        raise ActionError("the key 'fn' is handled by the keyboard's firmware and cannot be pressed")
    if canonical in _NAMED_KEYSYMS:
        return _NAMED_KEYSYMS[canonical]
    if len(canonical) == 1:
        return char_keysym(canonical)
    raise ActionError(f"the key {key!r} has no keysym")


def char_keysym(character: str) -> int:
    """The keysym that types one character; ActionError for control characters other than \\n, \\t."""
    if len(character) != 1:
        raise ActionError(f"expected one character, got {character!r}")
    if character in _TEXT_CONTROL_KEYSYMS:
        return _TEXT_CONTROL_KEYSYMS[character]
    code = ord(character)
    if code < 0x20 or 0x7F <= code < 0xA0 or 0xD800 <= code <= 0xDFFF:
        raise ActionError(f"the character U+{code:04X} cannot be typed")
    if code <= 0xFF:
        return code
    return 0x01000000 + code


def text_keysyms(text: str) -> list[int]:
    """The keysyms typing `text`, one per character; ActionError naming the first untypable one."""
    return [char_keysym(character) for character in text]
