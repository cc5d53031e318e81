"""Typing through the portal on other keyboard layouts, with the second layout active, on headless GNOME.

Mutter runs with a hand on its layouts (tests/support/mutter_keyboard.py: the two calls gnome-shell
makes when the user picks an input source). For `us`, and `us,ru` with Russian active, every text of
the X11 matrix is typed into a native Wayland Qt field; a cell passes when the field holds exactly
the text, or when the executor refused the action in words before anything was sent (then the
field is unchanged). The test's own hand (mutter's RemoteDesktop, not Holodesk) first shows which
layout is active: a Cyrillic keysym types only while Russian is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest

from holodesk.automation.actions import MAX_KEY_REPEATS, Click, KeyCombo, Point, TypeText
from holodesk.automation.errors import ActionError
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.wayland.keymap import compositor_keymap
from holodesk.automation.wayland.session import WaylandSession
from tests.automation.test_typing_layouts import TEXTS
from tests.automation.wayland.conftest import WaylandTarget
from tests.automation.wayland.test_portal_backend import session  # noqa: F401 - the module's portal session
from tests.support.gnome_session import inside_gnome_session
from tests.support.gnome_stack import GnomeStack
from tests.support.mutter_remote import MutterRemote

pytestmark = pytest.mark.display

# (layouts given to mutter, the active one from 0, the layout names the keymap then has)
LAYOUTS = {
    "us": ("us", 0, ("English (US)",)),
    "us,ru@ru": ("us,ru", 1, ("English (US)", "Russian")),
}
CYRILLIC_SHORT_I = 0x6CA  # й: on the Russian layout only
FENCE = "55"  # typed by both layouts and in none of the texts: the end of a cell's input


@pytest.fixture(scope="module")
def gnome_stack() -> Iterator[GnomeStack]:
    """This module's own stack: mutter whose layouts the test sets (overrides conftest's)."""
    with inside_gnome_session(layouts_hand=True) as stack:
        yield stack


def use_layout(stack: GnomeStack, name: str) -> None:
    layouts, group, names = LAYOUTS[name]
    stack.set_keymap(layouts, group)
    deadline = time.monotonic() + 10
    while (found := compositor_keymap().layout_names) != names:
        assert time.monotonic() < deadline, f"the compositor's keymap has {found}, not {names}"
        time.sleep(0.05)


def _empty_field(executor: InputPerformer, target: WaylandTarget) -> None:
    """Click the field, type a fence at its end, delete it all with Backspace (keys every layout has)."""
    left, top, width, height = target.ready["layout"]["field"]
    assert executor.execute(Click(Point(left + width // 2, top + height // 2))).ok
    assert executor.execute(KeyCombo(("end",))).ok
    target.drain()
    assert executor.execute(TypeText(FENCE)).ok
    holding = _fenced_text(target)
    left_to_delete = len(holding) + len(FENCE)
    while left_to_delete:  # a key combination repeats at most MAX_KEY_REPEATS times
        presses = min(left_to_delete, MAX_KEY_REPEATS)
        assert executor.execute(KeyCombo(("backspace",), repeat=presses)).ok
        left_to_delete -= presses
    target.wait_for("text", 10.0, text="")
    target.drain()


def _fenced_text(target: WaylandTarget) -> str:
    """The field's text before the fence, once the fence arrived (every earlier key is in)."""
    deadline = time.monotonic() + 10
    while (remaining := deadline - time.monotonic()) > 0:
        line = target.process.next(remaining)
        if line is None:
            break
        record = json.loads(line)
        if record["event"] == "text" and record["text"].endswith(FENCE):
            return str(record["text"])[: -len(FENCE)]
    pytest.fail("the fence did not arrive in the Wayland field within 10 s")


def _portal_cell(executor: InputPerformer, target: WaylandTarget, text: str) -> tuple[str, str | None]:
    """Type `text` into the emptied field: (typed or refused, None when the cell passed, else what went wrong)."""
    _empty_field(executor, target)
    refusal = None
    try:
        executor.validate(TypeText(text))
    except ActionError as exc:
        refusal = str(exc)
    if refusal is None:
        typed = executor.execute(TypeText(text))
        assert typed.ok, typed.detail
    executor.execute(TypeText(FENCE))
    got = _fenced_text(target)
    if refusal is not None:
        problem = None if refusal and got == "" else f"refused ({refusal!r}) but the field got {got!r}"
        return "refused", problem
    return "typed", None if got == text else f"got {got!r}"


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_text_arrives_exactly_or_is_refused_in_words(
    layout: str,
    gnome_stack: GnomeStack,
    session: tuple[WaylandSession, list[str]],  # noqa: F811 - the imported fixture
    mutter_remote: MutterRemote,
    wayland_target: WaylandTarget,
) -> None:
    wayland, _ = session
    executor = InputPerformer(PortalInput(wayland))
    use_layout(gnome_stack, layout)
    _empty_field(executor, wayland_target)
    mutter_remote.key(CYRILLIC_SHORT_I)  # the test's own hand: types only while Russian is active
    executor.execute(TypeText(FENCE))
    witness = _fenced_text(wayland_target)
    assert witness == ("й" if layout.endswith("@ru") else ""), f"{layout}: the active layout is not the expected one"
    outcomes: dict[str, str] = {}
    wrong: dict[str, str] = {}
    for name, text in TEXTS.items():
        outcomes[name], problem = _portal_cell(executor, wayland_target, text)
        if problem:
            wrong[name] = problem
    assert not wrong, "\n".join(f"{layout}: Wayland Qt field / {name}: {what}" for name, what in wrong.items())
    print(layout, outcomes)
