"""What the focused program expects: its paste key, its select-all key, whether it is a terminal.

Programs are named by their X11 WM_CLASS class; a backend that cannot tell which program has the
focus (the Wayland portal) says None, and the plan refuses what would depend on it.
"""

from __future__ import annotations

import sys

# WM_CLASS classes (lower-cased) of X11 terminal emulators that paste the clipboard with ctrl+shift+v.
TERMINAL_CLASSES = frozenset(
    {"gnome-terminal", "gnome-terminal-server", "konsole", "xfce4-terminal", "mate-terminal", "tilix",
     "terminator", "alacritty", "kitty", "org.wezfurlong.wezterm", "foot", "st-256color", "sakura",
     "terminology", "lxterminal", "qterminal", "guake", "tilda", "yakuake", "ptyxis", "blackbox"}
)  # fmt: skip
# Terminals whose only default paste is the primary selection (shift+insert).
PRIMARY_SELECTION_TERMINALS = frozenset({"xterm", "uxterm", "urxvt", "rxvt", "urxvt-unicode"})


def paste_keys(platform: str = sys.platform, window_class: str = "") -> tuple[str, ...]:
    """The canonical combination that pastes into a window of `window_class` on `platform`.

    Terminal emulators keep ctrl+v for the shell (a literal next character), so they paste with
    ctrl+shift+v; xterm-style terminals only paste the primary selection, with shift+insert.
    """
    if platform == "darwin":
        return ("super", "v")
    lowered = window_class.lower()
    if lowered in PRIMARY_SELECTION_TERMINALS:
        return ("shift", "insert")
    if lowered in TERMINAL_CLASSES or "terminal" in lowered:
        return ("ctrl", "shift", "v")
    return ("ctrl", "v")


# A paste key with no letter: text fields (Qt, GTK), Chromium and terminals paste with it on X11.
# Used where the active layout group lacks the paste key's letter (Russian active): a program that
# reads shortcuts by the physical key (Chromium) ignores ctrl+v sent on a spare keycode, and kitty
# reads the key that has v in another group as its Cyrillic letter.
LETTERLESS_PASTE_KEYS = ("shift", "insert")


def is_terminal(window_class: str) -> bool:
    """True for a terminal emulator's WM_CLASS class: its shell reads ctrl+a and Enter as commands."""
    lowered = window_class.lower()
    return lowered in TERMINAL_CLASSES or lowered in PRIMARY_SELECTION_TERMINALS or "terminal" in lowered


def select_all_keys(platform: str = sys.platform) -> tuple[str, ...]:
    """The canonical combination that selects a text field's whole content on `platform`."""
    return ("super", "a") if platform == "darwin" else ("ctrl", "a")
