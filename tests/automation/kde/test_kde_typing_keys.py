"""The keys PortalInput presses for text on KDE: the active layout's, by keycode, never a keysym.

Real keymaps compiled by libxkbcommon (us,ru as KWin builds it); the portal and the session are
stand-ins that record what PortalInput sends. The expected evdev codes are written out from
linux/input-event-codes.h and the XKB us and ru layouts, not computed by the code under test:
KEY_LEFTSHIFT 42, KEY_5 6, KEY_COMMA 51 (us ","), KEY_SLASH 53 (ru has "." on it, "," with Shift;
us has "." on KEY_DOT 52), KEY_SEMICOLON 39 (ru "ж"). What the desktop makes of those keys is
proven on a real KWin in test_kde_typing_matrix.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

import pytest

from holodesk.automation.actions import KeyCombo, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import XCLIP
from holodesk.automation.errors import ActionError, ExecutionError
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.input.portal.typing_keys import Keyboard, kde_keyboard
from holodesk.automation.input.primitives import KeyPresses, TypedText
from holodesk.automation.wayland.kde_layout import ActiveLayout, LayoutUnknown
from holodesk.automation.wayland.keymap import CompositorKeymap
from holodesk.automation.wayland.keysyms import char_keysym
from holodesk.automation.wayland.portal import PortalSession
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession

KEY_LEFTSHIFT, KEY_5, KEY_COMMA, KEY_SLASH, KEY_SEMICOLON = 42, 6, 51, 53, 39
COMMA_KEYSYM = 0x2C


def compiled(symbols: str) -> CompositorKeymap:
    text = (
        'xkb_keymap { xkb_keycodes { include "evdev+aliases(qwerty)" }; xkb_types { include "complete" }; '
        f'xkb_compat {{ include "complete" }}; xkb_symbols {{ include "{symbols}" }}; }};'
    )
    return CompositorKeymap.from_text(text.encode())


US_RU = compiled("pc+us+ru:2+inet(evdev)")


def evdev_keys(keyboard: Keyboard, character: str) -> tuple[int, ...] | None:
    keys = keyboard.keys(character, char_keysym(character))
    assert keys is not None, f"{character!r} is not typable"
    return keys.evdev_keys


def test_on_kde_a_character_goes_on_the_active_layouts_keys_and_one_it_lacks_is_not_typed() -> None:
    russian = Keyboard(US_RU, kde=True, active=1)
    assert evdev_keys(russian, ",") == (KEY_LEFTSHIFT, KEY_SLASH)
    assert evdev_keys(russian, "ж") == (KEY_SEMICOLON,)
    assert russian.keys("q", char_keysym("q")) is None
    assert "the active keyboard layout (Russian, of English (US), Russian) has no key for 'q'" in (
        russian.missing_words(["q"])
    )
    english = Keyboard(US_RU, kde=True, active=0)
    assert evdev_keys(english, ",") == (KEY_COMMA,)
    assert english.keys("ж", char_keysym("ж")) is None


def test_on_gnome_a_character_on_different_keys_goes_by_keysym_as_before() -> None:
    gnome = Keyboard(US_RU)
    assert evdev_keys(gnome, ",") is None  # mutter finds it in the active layout
    assert evdev_keys(gnome, "5") == (KEY_5,)
    assert gnome.keys("ж", char_keysym("ж")) is None  # us lacks it: pasted


def test_where_kwin_does_not_say_only_characters_on_the_same_keys_in_every_layout_are_typed() -> None:
    def unknown() -> ActiveLayout:
        raise LayoutUnknown("KWin's keyboard service (org.kde.keyboard) answered getLayout with ServiceUnknown")

    keyboard = kde_keyboard(US_RU, unknown)
    assert keyboard.active is None
    assert evdev_keys(keyboard, "5") == (KEY_5,)
    assert keyboard.keys(",", char_keysym(",")) is None
    assert "KWin did not say which keyboard layout is active (KWin's keyboard service" in keyboard.missing_words([","])
    mismatched = kde_keyboard(US_RU, lambda: ActiveLayout(0, ("us", "ru", "de")))
    assert mismatched.active is None and "KWin names 3 layouts" in mismatched.unknown_why
    one_layout = kde_keyboard(compiled("pc+us+inet(evdev)"), unknown)  # one layout: KWin is not asked
    assert one_layout.active == 0


@dataclass
class RecordingPortal:
    """Records the keyboard calls PortalInput makes; a stand-in for the portal session."""

    sent: list[tuple[str, int, bool]] = field(default_factory=list)
    pointer_allowed: bool = True
    keyboard_allowed: bool = True

    def keyboard_keysym(self, keysym: int, pressed: bool) -> None:
        self.sent.append(("keysym", keysym, pressed))

    def keyboard_keycode(self, evdev_keycode: int, pressed: bool) -> None:
        self.sent.append(("keycode", evdev_keycode, pressed))

    def pointer_motion_absolute(self, stream: object, x: float, y: float) -> None:
        pass


@dataclass
class StubStream:
    size: tuple[int, int] = (1280, 800)


@dataclass
class StubMonitor:
    stream: StubStream = field(default_factory=StubStream)


class StubSession:
    def __init__(self, portal: RecordingPortal) -> None:
        self.portal = portal

    def started(self) -> tuple[PortalSession, tuple[StreamMonitor, ...]]:
        return cast(PortalSession, self.portal), (cast(StreamMonitor, StubMonitor()),)

    def note_input_began(self) -> None:
        pass

    def note_input(self) -> None:
        pass


def typed(text: str, *, kde: bool, layouts: list[int]) -> list[tuple[str, int, bool]]:
    """What PortalInput sends for `text`, KWin answering each ask with the next of `layouts`."""
    portal = RecordingPortal()
    answers = iter(layouts)
    backend = PortalInput(
        cast(WaylandSession, StubSession(portal)),
        key_interval_s=0,
        device_warmup_s=0,
        clipboard=XCLIP,
        keymap=lambda: US_RU,
        kde=kde,
        active_layout=lambda: ActiveLayout(next(answers), ("us", "ru")),
    )
    step = TypedText(text)
    backend.check(step)
    with backend.acting(TypeText(text), (step,)):
        portal.sent.clear()  # the start-up Shift tap
        backend.perform(step, CancelToken())
    return portal.sent


def test_kde_text_with_russian_active_is_pressed_on_russian_keys_by_keycode() -> None:
    pressed = [("keycode", key, True) for key in (KEY_LEFTSHIFT, KEY_SLASH)]
    released = [("keycode", key, False) for key in (KEY_SLASH, KEY_LEFTSHIFT)]
    semicolon = [("keycode", KEY_SEMICOLON, True), ("keycode", KEY_SEMICOLON, False)]
    assert typed(",ж", kde=True, layouts=[1, 1, 1]) == pressed + released + semicolon
    # GNOME's route (the fix off): "," by keysym, which KDE's portal types as "б" with Russian active.
    assert typed(",", kde=False, layouts=[]) == [("keysym", COMMA_KEYSYM, True), ("keysym", COMMA_KEYSYM, False)]


def test_kde_text_the_active_layout_lacks_is_pasted_and_the_route_says_why() -> None:
    backend = PortalInput(
        cast(WaylandSession, StubSession(RecordingPortal())),
        clipboard=XCLIP,
        keymap=lambda: US_RU,
        kde=True,
        active_layout=lambda: ActiveLayout(1, ("us", "ru")),
    )
    route = backend.input_target(TypeText("qж")).text_route
    assert not route.typed
    assert route.reason == "the active keyboard layout (Russian, of English (US), Russian) has no key for 'q'"


def test_a_layout_switch_while_typing_on_kde_is_said() -> None:
    with pytest.raises(ExecutionError, match=r"switched from Russian to English \(US\) while the text was typed"):
        typed("ж", kde=True, layouts=[1, 1, 0])


def pressed_keys(keys: str, *, kde: bool) -> list[tuple[str, int, bool]]:
    """What PortalInput sends for the key press `keys` (no modifier held), Russian active on KDE."""
    portal = RecordingPortal()
    backend = PortalInput(
        cast(WaylandSession, StubSession(portal)),
        key_interval_s=0,
        device_warmup_s=0,
        keymap=lambda: US_RU,
        kde=kde,
        active_layout=lambda: ActiveLayout(1, ("us", "ru")),
    )
    step = KeyPresses((), (keys,))
    backend.check(step)
    with backend.acting(KeyCombo((keys,)), (step,)):
        portal.sent.clear()  # the start-up Shift tap
        backend.perform(step, CancelToken())
    return portal.sent


def test_a_key_on_another_key_in_the_active_layout_is_pressed_there_on_kde_or_refused() -> None:
    # "." is bare on KEY_SLASH in ru (on KEY_DOT in us, where KDE's portal would press it).
    assert pressed_keys(".", kde=True) == [("keycode", KEY_SLASH, True), ("keycode", KEY_SLASH, False)]
    assert pressed_keys(".", kde=False) == [("keysym", 0x2E, True), ("keysym", 0x2E, False)]  # GNOME: unchanged
    with pytest.raises(ActionError, match=r"the active layout \(Russian\) gives it only with a modifier"):
        pressed_keys(",", kde=True)
    assert pressed_keys("enter", kde=True) == [("keysym", 0xFF0D, True), ("keysym", 0xFF0D, False)]
