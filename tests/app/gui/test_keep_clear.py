"""The approval panel and the typing bubble never cover where the action lands (issue 49).

The geometry first (app/gui/keep_clear.py, no Qt; a known caret's line instead of the window's
bottom rows: a real GTK caret is tests/app/gui/test_caret_place.py), then real windows: a bash in an
xterm (no AT-SPI: the bottom rows) on the module's Xvfb, given the X input focus, with the pointer
parked in the far corner (where the user left it); the panel and the overlay run in
tests/support/overlay_probe.py and report their rectangles as the real Qt windows have them. Neither
may meet the terminal's bottom text rows (its prompt line), on one monitor and on two of different
sizes, and the bubble sits next to those rows, not far from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.gui.keep_clear import CARET_MARGIN, Box, around, bubble_spot, panel_spot, text_rows, typed_area
from holodesk.automation.virtual_display import TWO_MONITORS, DisplayLayout, XvfbServer
from tests.support.overlay_probe import OverlayProbe
from tests.support.xterm_shell import bash_in_xterm

# The terminal's last rows that must stay visible: two text rows of xterm's default font and its border.
LAST_ROWS_PX = 40
NEAR_PX = 40  # the bubble's gap to the rows it sits next to, at most


def meets(a: Box, b: Box) -> bool:
    return a.overlap(b) > 0


# -- the geometry -------------------------------------------------------------------------------


def test_the_panel_takes_a_spot_that_covers_nothing_kept_clear() -> None:
    screen = Box(0, 0, 1280, 800)
    # A terminal across the bottom of the screen and a target top right: the top-left spot is left.
    rows = text_rows(Box(0, 500, 1280, 300))
    target = around(1200, 60)
    left, top = panel_spot(screen, 440, 300, [rows, target])
    panel = Box(left, top, 440, 300)
    assert not meets(panel, rows) and not meets(panel, target)


def test_a_crowded_screen_gives_the_least_overlap() -> None:
    screen = Box(0, 0, 500, 400)
    rows = text_rows(Box(0, 0, 500, 400))  # a maximised terminal on a small screen
    left, top = panel_spot(screen, 440, 300, [rows], margin=8)
    assert not meets(Box(left, top, 440, 300), rows)


def test_the_bubble_goes_under_the_rows_or_beside_them_at_the_screens_end() -> None:
    screen = Box(0, 0, 1280, 800)
    rows = text_rows(Box(100, 100, 500, 200))
    left, top = bubble_spot(screen, 300, 60, rows)
    assert (left, top) == (100, rows.bottom + 6)
    low = text_rows(Box(700, 600, 580, 200))  # a terminal in the bottom-right corner
    left, top = bubble_spot(screen, 300, 60, low)
    bubble = Box(left, top, 300, 60)
    # Left of its last rows, level with the prompt: not above it on the older lines or the title bar.
    assert not meets(bubble, low) and bubble.right <= low.left and bubble.bottom == low.bottom
    wide = text_rows(Box(0, 600, 1280, 200))  # a full-width terminal at the bottom: above is all that is left
    left, top = bubble_spot(screen, 300, 60, wide)
    assert not meets(Box(left, top, 300, 60), wide) and top + 60 <= wide.top


def test_a_known_caret_keeps_its_line_clear_instead_of_the_windows_bottom_rows() -> None:
    screen = Box(0, 0, 1280, 800)
    window = Box(20, 20, 1240, 760)  # nearly the whole screen, its text field at the top
    field = Box(60, 60, 1160, 34)
    caret = Box(101, 68, 2, 17)
    area = typed_area(window, caret, field)
    # From the caret to the field's right edge (where the typed text goes), the margin round it.
    assert area == Box(
        101 - CARET_MARGIN, 68 - CARET_MARGIN, field.right - 101 + 2 * CARET_MARGIN, 17 + 2 * CARET_MARGIN
    )
    left, top = panel_spot(screen, 440, 300, [area])
    assert not meets(Box(left, top, 440, 300), area), "the panel covers the caret's line"
    bubble = Box(*bubble_spot(screen, 300, 60, area), 300, 60)
    assert not meets(bubble, area) and bubble.top - area.bottom <= 6  # right under the caret's line
    assert typed_area(window, None, field) == text_rows(window)  # no caret: the bottom rows, as before


# -- real windows ----------------------------------------------------------------------------------

SINGLE = DisplayLayout(1280, 800)


def xterm_window(display: str) -> Box:
    """The xterm's top-level window and its rectangle, found by its class (not by the focus)."""
    from Xlib import display as xdisplay

    connection = xdisplay.Display(display)
    try:
        root = connection.screen().root
        for child in root.query_tree().children:
            wm_class = child.get_wm_class()
            if wm_class and "XTerm" in wm_class:
                geometry = child.get_geometry()
                origin = root.translate_coords(child, 0, 0)
                return Box(origin.x, origin.y, geometry.width, geometry.height)
    finally:
        connection.close()
    raise AssertionError("no XTerm window on the display")


def focus_xterm_and_park_pointer(display: str, pointer: tuple[int, int]) -> None:
    """Give the xterm the X input focus (as a click would) and leave the pointer far from it."""
    from Xlib import X
    from Xlib import display as xdisplay

    connection = xdisplay.Display(display)
    try:
        root = connection.screen().root
        for child in root.query_tree().children:
            wm_class = child.get_wm_class()
            if wm_class and "XTerm" in wm_class:
                child.set_input_focus(X.RevertToParent, X.CurrentTime)
        root.warp_pointer(*pointer)
        connection.sync()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def probe(xvfb: XvfbServer) -> Iterator[OverlayProbe]:
    started = OverlayProbe.start()
    try:
        yield started
    finally:
        started.close()


# Each: the layout, the xterm's top-left, where the pointer was left.
PLACES = {
    "single-bottom-right": (SINGLE, (760, 640), (10, 10)),
    "single-bottom-left": (SINGLE, (0, 650), (1270, 10)),
    "single-top-right": (SINGLE, (780, 0), (10, 790)),
    "two-right-monitor-bottom": (TWO_MONITORS, (2780, 610), (10, 10)),
    "two-left-monitor-bottom-right": (TWO_MONITORS, (1420, 930), (3000, 10)),
}


# Each place on its own layout's display only (the module's Xvfb per layout, started once for its places).
LAYOUT_PLACES = [pytest.param(layout, place, id=f"{layout}-{place}") for place, (layout, _, _) in PLACES.items()]


@pytest.mark.display
@pytest.mark.parametrize(("xvfb", "place"), LAYOUT_PLACES, indirect=["xvfb"], scope="module")
@pytest.mark.parametrize("step", ["type", "key"])
def test_the_panel_and_the_bubble_keep_the_terminals_last_rows_clear(
    xvfb: XvfbServer, probe: OverlayProbe, tmp_path: Path, place: str, step: str
) -> None:
    layout, origin, pointer = PLACES[place]
    assert layout == xvfb.layout  # the parametrisation pairs them
    action = {"kind": "type", "text": "echo hello"} if step == "type" else {"kind": "key", "keys": ["ctrl", "m"]}
    with bash_in_xterm(tmp_path, origin):
        terminal = xterm_window(xvfb.display)
        focus_xterm_and_park_pointer(xvfb.display, pointer)
        probe.send({"cmd": "decide", "step": 4, "action": action})
        shown = probe.wait_for("panel", 20)
        probe.send({"cmd": "cancel"})
        probe.wait_for("decided", 20)
    last_rows = text_rows(terminal, LAST_ROWS_PX)
    panel = Box(*shown["window"])
    assert not meets(panel, last_rows), f"the panel {panel} covers the terminal's last rows {last_rows}"
    (bubble,) = [Box(*rect) for rect in shown["drawn"]]
    assert not meets(bubble, last_rows), f"the bubble {bubble} covers the terminal's last rows {last_rows}"
    assert not meets(bubble, panel), f"the panel {panel} covers the bubble {bubble}"
    # Next to the rows where the text goes: under, beside or just above them, not across the screen.
    across = max(bubble.left - last_rows.right, last_rows.left - bubble.right, 0)
    down = max(bubble.top - last_rows.bottom, last_rows.top - bubble.bottom, 0)
    assert across <= NEAR_PX, f"the bubble {bubble} is far from the rows {last_rows}"
    assert down <= NEAR_PX + text_rows(terminal).height, f"the bubble {bubble} is far from the rows {last_rows}"


def test_with_room_to_spare_the_panel_keeps_its_margin_from_the_screens_edge() -> None:
    screen = Box(0, 0, 1280, 800)
    left, top = panel_spot(screen, 440, 300, [around(100, 100)], margin=24)
    assert left >= 24 and left + 440 <= 1280 - 24
    assert top >= 24 and top + 300 <= 800 - 24
