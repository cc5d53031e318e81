"""Which keys type each character of a text through the portal: by keycode, by keysym, or not at all.

GNOME (mutter) finds a keysym in the active layout, which only the focused client is told: a
character goes by keycode on the keys every layout of the keymap gives it on, by keysym where the
layouts differ (mutter picks the active layout's key), and is not typed where some layout lacks it
(automation.wayland.keymap).
KDE's portal finds a keysym in the keymap's first layout only, whichever is active
(automation.wayland.kde_layout): a keysym there types another character with a second layout
active. So on KDE text never goes by keysym: each character goes by keycode on the keys the active
layout (KWin says which) gives it on; one the active layout has no key for is not typed. Where KWin
does not say, only the characters every layout has on the same keys are typed. The backend pastes
what is not typed, or refuses it in words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from holodesk.automation.wayland.kde_layout import ActiveLayout, LayoutUnknown
from holodesk.automation.wayland.keymap import CompositorKeymap, legacy_keysym

# NotifyKeyboardKeycode takes evdev codes; XKB keycodes are those plus 8.
EVDEV_KEYCODE_OFFSET = 8


@dataclass(frozen=True, slots=True)
class CharacterKeys:
    """How one character is sent: the evdev codes of the keys to hold in order (its level's modifier,
    then its key), or by `keysym` when `evdev_keys` is None."""

    character: str
    keysym: int
    evdev_keys: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class Keyboard:
    """What the backend knows of the desktop's keyboard: its keymap, and on KDE the active layout
    (None with `unknown_why` where KWin did not say)."""

    keymap: CompositorKeymap
    kde: bool = False
    active: int | None = None
    unknown_why: str = ""

    def keys(self, character: str, unicode_keysym: int) -> CharacterKeys | None:
        """How `character` is typed exactly on this keyboard, or None where it cannot be."""
        keymap = self.keymap
        if self.kde and self.active is not None:
            for candidate in (unicode_keysym, legacy_keysym(character)):
                in_active = keymap.keys_in(self.active, candidate) if candidate else None
                if in_active is not None:
                    return CharacterKeys(character, candidate, _evdev(in_active))
            return None
        keysym = keymap.keysym_for(character, unicode_keysym)
        if keysym is None:
            return None
        keys = keymap.keys_for(keysym)
        if keys is None:
            # By keysym only where the desktop finds it in the active layout: mutter does, KDE's portal does not.
            return None if self.kde else CharacterKeys(character, keysym, None)
        return CharacterKeys(character, keysym, _evdev(keys))

    def keysym_lands_elsewhere(self, keysym: int) -> bool:
        """On KDE, whether `keysym` sent as a keysym (which KDE's portal finds in the first layout) lands
        on another key than the active layout's for it (on GNOME mutter finds the active one: never)."""
        if not self.kde:
            return False
        if self.active is None:
            return self.keymap.keys_for(keysym) is None
        return self.keymap.keys_in(0, keysym) != self.keymap.keys_in(self.active, keysym)

    @property
    def remedy(self) -> str:
        """What the user can do about characters this keyboard cannot type, as the start of a sentence."""
        return "Switch to a layout" if self.kde and len(self.keymap.layout_names) > 1 else "Add a layout"

    def missing_words(self, missing: Sequence[str]) -> str:
        """Why `missing` cannot be typed, in words: "the active keyboard layout (Russian) has no key for 'q'"."""
        shown = ", ".join(repr(character) for character in missing[:8]) + (" ..." if len(missing) > 8 else "")
        names = self.keymap.layout_names
        if not self.kde or len(names) == 1:
            return f"the keyboard layout ({', '.join(names)}) has no key for {shown}"
        if self.active is not None:
            return f"the active keyboard layout ({names[self.active]}, of {', '.join(names)}) has no key for {shown}"
        return (
            f"KWin did not say which keyboard layout is active ({self.unknown_why}), and the layouts "
            f"({', '.join(names)}) do not all have {shown} on the same keys"
        )


def kde_keyboard(keymap: CompositorKeymap, active_layout: Callable[[], ActiveLayout]) -> Keyboard:
    """The keyboard on KDE: one layout is the active one; with more, KWin is asked which."""
    if len(keymap.layout_names) == 1:
        return Keyboard(keymap, kde=True, active=0)
    try:
        active = active_layout()
    except LayoutUnknown as exc:
        return Keyboard(keymap, kde=True, unknown_why=str(exc))
    if len(active.names) != len(keymap.layout_names):
        count = len(keymap.layout_names)
        why = f"KWin names {len(active.names)} layouts ({', '.join(active.names)}), its keymap has {count}"
        return Keyboard(keymap, kde=True, unknown_why=why)
    return Keyboard(keymap, kde=True, active=active.index)


def _evdev(xkb_keycodes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(key - EVDEV_KEYCODE_OFFSET for key in xkb_keycodes)
