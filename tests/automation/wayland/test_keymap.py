"""The keymap check that decides what the portal can type: real keymaps compiled by libxkbcommon.

Mutter types a keysym only when the current layout has it on a level it can reach (plain, Shift,
AltGr); `CompositorKeymap` must say the same for every layout, since which one is current is not
known to a client without the keyboard focus.
"""

from __future__ import annotations

import pytest

from holodesk.automation.wayland.keymap import CompositorKeymap, KeymapUnavailable
from holodesk.automation.wayland.keysyms import char_keysym


def compiled(symbols: str) -> CompositorKeymap:
    """A keymap as a compositor builds it from layout names (XKB data from /usr/share/X11/xkb)."""
    text = (
        'xkb_keymap { xkb_keycodes { include "evdev+aliases(qwerty)" }; xkb_types { include "complete" }; '
        f'xkb_compat {{ include "complete" }}; xkb_symbols {{ include "{symbols}" }}; }};'
    )
    return CompositorKeymap.from_text(text.encode())


def keysym(keymap: CompositorKeymap, character: str) -> int | None:
    return keymap.keysym_for(character, char_keysym(character))


def test_a_us_layout_types_ascii_and_nothing_it_lacks() -> None:
    us = compiled("pc+us+inet(evdev)")
    assert us.layout_names == ("English (US)",)
    assert all(keysym(us, character) == ord(character) for character in "azAZ09~|{}<>@ ")
    assert [keysym(us, character) for character in "üß東—"] == [None, None, None, None]


def test_a_german_layout_types_umlauts_and_its_altgr_level_but_not_shift_altgr() -> None:
    de = compiled("pc+de+inet(evdev)")
    assert keysym(de, "ü") == 0xFC and keysym(de, "ß") == 0xDF
    assert keysym(de, "@") == ord("@")  # AltGr+q: mutter adds ISO_Level3_Shift
    assert keysym(de, "€") == 0x20AC  # the layout's legacy EuroSign, not the Unicode keysym 0x10020AC
    # Shift+AltGr+1 is level 4: mutter would press the key bare and type '1' instead.
    assert keysym(de, "¡") is None


def test_with_two_layouts_only_what_both_have_counts() -> None:
    both = compiled("pc+us+de:2+inet(evdev)")
    assert both.layout_names == ("English (US)", "German")
    assert keysym(both, "a") == ord("a")
    assert keysym(both, "ü") is None
    assert both.missing_from(0xFC) == ["English (US)"]


def test_a_keymap_that_does_not_compile_is_an_error() -> None:
    with pytest.raises(KeymapUnavailable, match="did not compile"):
        CompositorKeymap.from_text(b"xkb_keymap { nonsense };")


def test_a_shortcut_letter_one_layout_lacks_is_found_on_its_key_in_the_first_layout_that_has_it() -> None:
    us_ru = compiled("pc+us+ru:2+inet(evdev)")
    assert us_ru.missing_from(ord("v")) == ["Russian"]
    # v is on AB04 (XKB keycode 55, evdev KEY_V 47) in the US layout; the Russian layout has м there.
    assert us_ru.key_with(ord("v")) == (55, 0)
    assert us_ru.key_with(0x6CD) == (55, 1)  # Cyrillic_em: only the Russian layout has it
    assert us_ru.key_with(ord("V")) is None  # on Shift's level only: pressing the key bare types v
    fr = compiled("pc+fr+inet(evdev)")
    assert fr.key_with(ord("a")) == (24, 0)  # AZERTY: a is on AD01, where QWERTY has q


def test_the_keys_to_hold_for_a_keysym_are_its_levels_modifier_then_its_key_where_every_layout_agrees() -> None:
    # XKB keycodes (evdev + 8): LFSH 50, AC01 38 (a), AE04 13 (4/$), AD01 24 (q), LVL3 92, AB08 59 (,/;).
    us = compiled("pc+us+inet(evdev)")
    assert us.keys_for(ord("a")) == (38,)
    assert us.keys_for(ord("A")) == (50, 38)
    assert us.keys_for(ord("$")) == (50, 13)
    de = compiled("pc+de+inet(evdev)")
    assert de.keys_for(ord("@")) == (92, 24)  # AltGr+q, AltGr being the first key with ISO_Level3_Shift
    assert de.keys_for(ord(";")) == (50, 59)  # Shift+, on a German keyboard
    assert compiled("pc+us+de:2+inet(evdev)").keys_for(ord("A")) == (50, 38)  # the same in both
    # 1 is bare on US, Shift+& on French; z is on AB01 in US, AD02 in German: only mutter knows which
    # layout is active, so these go by keysym.
    assert compiled("pc+us+fr:2+inet(evdev)").keys_for(ord("1")) is None
    assert compiled("pc+us+de:2+inet(evdev)").keys_for(ord("z")) is None
    assert us.keys_for(0xFC) is None  # ü: not on a US keyboard
