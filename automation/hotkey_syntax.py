"""Global hotkeys in pynput's syntax ("<ctrl>+<alt>+h"): checking one, and the keys it names.

The app's settings and the routine files share this parser, so a routine's hotkey is held to the
same rules as the prompt's and two spellings of one key combination ("<alt>+<ctrl>+H") are known to
be the same. pynput itself is not imported here: it needs a display at import time.
"""

from __future__ import annotations

from holodesk.automation.errors import AutomationError

DEFAULT_PROMPT_HOTKEY = "<ctrl>+<alt>+h"

MODIFIER_KEY_NAMES = frozenset({
    "alt", "alt_l", "alt_r", "alt_gr", "cmd", "cmd_l", "cmd_r",
    "ctrl", "ctrl_l", "ctrl_r", "shift", "shift_l", "shift_r",
})  # fmt: skip
SPECIAL_KEY_NAMES = MODIFIER_KEY_NAMES | {
    "backspace", "caps_lock", "delete", "down", "end", "enter", "esc", "home", "left", "page_down", "page_up",
    "right", "space", "tab", "up", "insert", "menu", "num_lock", "pause", "print_screen", "scroll_lock",
    "media_play_pause", "media_volume_mute", "media_volume_down", "media_volume_up", "media_previous", "media_next",
    *(f"f{number}" for number in range(1, 21)),
}  # fmt: skip
# A left or right modifier is pressed as the modifier itself when the keys are compared.
_SIDELESS = {"alt_l": "alt", "alt_r": "alt", "cmd_l": "cmd", "cmd_r": "cmd", "ctrl_l": "ctrl", "ctrl_r": "ctrl",
             "shift_l": "shift", "shift_r": "shift"}  # fmt: skip


class HotkeySyntaxError(AutomationError, ValueError):
    """A hotkey that cannot be used, with what is wrong in words."""


def key_part(part: str) -> tuple[str, bool]:
    """(canonical form, is a modifier) of one pynput key: a single character or `<name>`."""
    if len(part) == 1 and not part.isspace():
        return part.lower(), False
    if len(part) > 2 and part[0] == "<" and part[-1] == ">":
        name = part[1:-1].lower()
        if name in SPECIAL_KEY_NAMES:
            return f"<{name}>", name in MODIFIER_KEY_NAMES
        if name.isdigit():  # a virtual key code, as pynput accepts
            return f"<{name}>", False
    raise HotkeySyntaxError(
        f"{part!r} is not a key: use one character, or a name in angle brackets such as <ctrl>, <alt>, <shift>, "
        "<cmd>, <esc>, <space>, <f1>"
    )


def split_hotkey(text: str) -> list[str]:
    """The hotkey's parts, split as pynput splits them: a '+' right after a separator is the plus key."""
    parts, start = [], 0
    for index, char in enumerate(text):
        if char == "+" and index != start:
            parts.append(text[start:index])
            start = index + 1
    if start == len(text):
        raise HotkeySyntaxError(f"{text!r} ends with '+'")
    parts.append(text[start:])
    return parts


def check_hotkey(value: object) -> str:
    """`value` if it is a usable global hotkey, else HotkeySyntaxError saying what is wrong.

    It needs <ctrl>, <alt> or <cmd> plus at least one ordinary key: a bare key, or one with only
    <shift>, would fire while the user types.
    """
    if not isinstance(value, str) or not value:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise HotkeySyntaxError(f"expected a hotkey such as {DEFAULT_PROMPT_HOTKEY!r}, got {shown}")
    parsed = [key_part(part) for part in split_hotkey(value)]
    names = [name for name, _ in parsed]
    if len(set(names)) != len(names):
        raise HotkeySyntaxError(f"{value!r} names a key twice")
    modifiers = [name for name, is_modifier in parsed if is_modifier]
    if not [name for name, is_modifier in parsed if not is_modifier]:
        raise HotkeySyntaxError(f"{value!r} has no ordinary key; add one, e.g. {DEFAULT_PROMPT_HOTKEY!r}")
    if not [name for name in modifiers if not name.startswith("<shift")]:
        raise HotkeySyntaxError(
            f"{value!r} would fire while typing: add <ctrl>, <alt> or <cmd>, e.g. {DEFAULT_PROMPT_HOTKEY!r}"
        )
    return value


def hotkey_keys(hotkey: str) -> frozenset[str]:
    """The keys a valid hotkey names, spelled one way: equal sets are the same key combination."""
    keys = set()
    for part in split_hotkey(hotkey):
        name, _ = key_part(part)
        bare = name.strip("<>") if len(name) > 1 else name
        keys.add(f"<{_SIDELESS[bare]}>" if bare in _SIDELESS else name)
    return frozenset(keys)
