"""The typing matrix on headless KWin, through the KDE portal, on the keys Holodesk picks.

For each layout case a fresh KWin stack starts with it (kxkbrc; with two layouts, KWin's own
org.kde.keyboard switches to the active one, as the user's switch does). Holodesk reads KWin's keymap
as every Wayland client gets it (automation/wayland/keymap.py), asks KWin which layout is active
(automation/wayland/kde_layout.py) and decides per character with the code PortalInput._type uses
(automation/input/portal/typing_keys.py, `kde_keyboard` and `Keyboard.keys`): on KDE by keycode on
the active layout's keys; a character the active layout has no key for is not sent as keys
(Holodesk pastes it, or refuses in words: proven on GNOME). PortalInput itself cannot run here (its
session needs a first frame, which KWin 5.27 does not send headless: test_kde_capture_blocked.py),
so the test sends those same keys through Holodesk's portal session.

What the KDE portal (5.27) does with a keysym: it looks for the first key with it in the layout its
own keyboard state has, pressing Shift for level 2 and Right Alt for level 3; a keysym no key has is
dropped with only a warning in its log. Two things follow, both seen here:
- Until the portal has handled KWin's keymap event, it looks keysyms up in libxkbcommon's default
  (us) keymap: on a fresh portal, "a" typed "q" on fr. Its keyboard is made on the first keysym, so
  WaylandSession's start-up Shift tap loads it; the test taps Shift the same way and then waits,
  bounded, until the layout's witness character types right.
- The portal is never the focused client, so its state never leaves layout 1: with `us,ru` and
  Russian active, "," by keysym types "б" (test_a_keysym_types_the_first_layouts_key_on_kde shows it).
  So on KDE Holodesk sends text by keycode only, in the layout KWin says is active; with GNOME's
  route (keysym where the layouts differ) the `us,ru@1` case has silently wrong cells.

Each text of the X11 matrix (tests/automation/test_typing_layouts.py; a QLineEdit takes no line
break, so not the newline text) is a cell. The native Wayland Qt field must hold exactly the
characters sent and a fence typed after them (a bounded wait for that exact text, never a prefix).
A silently wrong cell is one where it does not; the test fails listing them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from bench.rigs.kwin_stack import WAYLAND_SOCKET, KwinStack
from holodesk.automation.input.portal.typing_keys import CharacterKeys, Keyboard, kde_keyboard
from holodesk.automation.wayland.kde_layout import ActiveLayout, LayoutUnknown, kwin_active_layout
from holodesk.automation.wayland.keymap import compositor_keymap
from holodesk.automation.wayland.portal import PortalSession
from holodesk.automation.wayland.session import SHIFT_KEYSYM
from tests.automation.kde.conftest import KdeTarget, click, open_portal, started_stack
from tests.automation.test_typing_layouts import TEXTS

pytestmark = [pytest.mark.display, pytest.mark.kde]

UNICODE_KEYSYM = 0x01000000  # X11's keysym for a Unicode character: this plus its code point
KEYMAP_LOADED_WITHIN_S = 15.0


@dataclass(frozen=True, slots=True)
class Case:
    layouts: str
    active: int
    witness: str  # a character this case types right only with its own keymap loaded in the portal

    def __str__(self) -> str:
        return f"{self.layouts}@{self.active}"


CASES = [
    Case("us", 0, "a"),
    Case("de", 0, "ü"),
    Case("fr", 0, "a"),  # on the key us has q on
    Case("ru", 0, "ж"),
    Case("us,ru", 0, "5"),
    Case("us,ru", 1, "5"),
]


def keys_of(keyboard: Keyboard, character: str) -> CharacterKeys | None:
    return keyboard.keys(character, UNICODE_KEYSYM + ord(character))


def send(portal: PortalSession, keyboard: Keyboard, character: str) -> None:
    """Press and release `character` as PortalInput._type does, on the keys `keyboard` picks."""
    keys = keys_of(keyboard, character)
    assert keys is not None
    if keys.evdev_keys is None:
        portal.keyboard_keysym(keys.keysym, True)
        portal.keyboard_keysym(keys.keysym, False)
        return
    for key in keys.evdev_keys:
        portal.keyboard_keycode(key, True)
    for key in reversed(keys.evdev_keys):
        portal.keyboard_keycode(key, False)


def wait_for_portal_keymap(portal: PortalSession, keyboard: Keyboard, target: KdeTarget, witness: str) -> None:
    """Tap Shift as WaylandSession's start does (the portal then makes its keyboard and asks KWin for
    the keymap), then type `witness` until it arrives as itself, bounded."""
    portal.keyboard_keysym(SHIFT_KEYSYM, True)
    portal.keyboard_keysym(SHIFT_KEYSYM, False)
    deadline = time.monotonic() + KEYMAP_LOADED_WITHIN_S
    while time.monotonic() < deadline:
        target.clear()
        send(portal, keyboard, witness)
        if target.wait_for_or_none("text", 1.0, text=witness) is not None:
            target.clear()
            return
    pytest.fail(f"{witness!r} never typed as itself within {KEYMAP_LOADED_WITHIN_S:g} s: {target.seen[-5:]}")


def type_matrix(stack: KwinStack, case: Case) -> tuple[list[str], list[str], set[str]]:
    """(wrong cells, guarded cells, the characters typed right) of the matrix on the running stack,
    on the keys Holodesk's KDE route picks."""
    portal = open_portal(stack)
    target = KdeTarget(stack)
    try:
        keymap = compositor_keymap(str(stack.runtime_dir / WAYLAND_SOCKET), timeout_s=10.0)
        assert len(keymap.layout_names) == len(case.layouts.split(",")), keymap.layout_names
        keyboard = kde_keyboard(keymap, lambda: kwin_active_layout(stack.bus_address))
        assert keyboard.active == case.active, f"Holodesk found layout {keyboard.active}: {keyboard.unknown_why}"
        field = target.ready["layout"]["field"]
        click(portal, field[0] + 20, field[1] + field[3] // 2)
        target.wait_for("release", 5.0, widget="field")
        wait_for_portal_keymap(portal, keyboard, target, case.witness)
        fence = next(c for c in "5 " if keys_of(keyboard, c) is not None)
        wrong: list[str] = []
        guarded: list[str] = []
        typed: set[str] = set()
        for name, text in TEXTS.items():
            sendable = "".join(c for c in text if keys_of(keyboard, c) is not None)
            if sendable != text:
                guarded.append(name)
            target.clear()
            for character in sendable + fence:
                send(portal, keyboard, character)
            # A bound, not a pace: 600 keys through the portal took over 10 s on a loaded machine.
            if target.wait_for_or_none("text", 30.0, text=sendable + fence) is None:
                last = [r["text"] for r in target.seen if r.get("event") == "text"][-1:]
                wrong.append(f"{name}: sent {sendable + fence!r}, the field holds {last}")
            else:
                typed |= set(sendable)
        return wrong, guarded, typed
    finally:
        target.close()
        portal.close()


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_character_the_keymap_allows_types_exactly(case: Case) -> None:
    stack = started_stack(keyboard_layout=case.layouts)
    try:
        if case.active:
            stack.set_active_layout(case.active)
        wrong, guarded, typed = type_matrix(stack, case)
    finally:
        stack.stop()
    assert wrong == [], f"silently wrong cells on {case}: {wrong}"
    assert case.witness in typed, f"{case}: {case.witness!r} was never typed in a cell"
    print(f"{case}: {len(TEXTS) - len(guarded)} cells typed whole; guarded (typable characters only): {guarded}")


@pytest.fixture(scope="module")
def us_ru_stack() -> Iterator[KwinStack]:
    stack = started_stack(keyboard_layout="us,ru")
    try:
        yield stack
    finally:
        stack.stop()


def test_kwin_says_which_layout_is_active(us_ru_stack: KwinStack) -> None:
    """Holodesk's query follows the user's switch; a bus without KWin's keyboard service is said in words."""
    us_ru_stack.set_active_layout(0)
    assert kwin_active_layout(us_ru_stack.bus_address) == ActiveLayout(0, ("us", "ru"))
    us_ru_stack.set_active_layout(1)
    assert kwin_active_layout(us_ru_stack.bus_address) == ActiveLayout(1, ("us", "ru"))
    with pytest.raises(LayoutUnknown, match="cannot connect to the D-Bus session bus"):
        kwin_active_layout(f"unix:path={us_ru_stack.root}/no-bus")


def test_a_keysym_types_the_first_layouts_key_where_the_kde_route_types_exactly(us_ru_stack: KwinStack) -> None:
    """Why KDE text goes by keycode: with Russian active, KDE's portal types ',' sent by keysym (as
    GNOME's route sends it, its keys differing between us and ru) on us's ',' key, which gives 'б'.
    Holodesk's KDE route presses the active layout's keys and ',' arrives as ','."""
    us_ru_stack.set_active_layout(1)
    portal = open_portal(us_ru_stack)
    target = KdeTarget(us_ru_stack)
    try:
        keymap = compositor_keymap(str(us_ru_stack.runtime_dir / WAYLAND_SOCKET), timeout_s=10.0)
        kde = kde_keyboard(keymap, lambda: kwin_active_layout(us_ru_stack.bus_address))
        gnome = Keyboard(keymap)
        field = target.ready["layout"]["field"]
        click(portal, field[0] + 20, field[1] + field[3] // 2)
        target.wait_for("release", 5.0, widget="field")
        wait_for_portal_keymap(portal, kde, target, "5")
        by_keysym = keys_of(gnome, ",")
        assert by_keysym is not None and by_keysym.evdev_keys is None, by_keysym
        for route in (gnome, kde):
            target.clear()
            send(portal, route, ",")
            send(portal, kde, "5")  # a fence: the text is complete once it arrives
            target.wait_for("text", 10.0, text="б5" if route is gnome else ",5")
    finally:
        target.close()
        portal.close()
