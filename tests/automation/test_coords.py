"""Coordinate conversion: model <-> image <-> screen <-> Qt logical, on awkward desktops."""

from __future__ import annotations

import math

import pytest

from holodesk.automation.actions import Click, Drag, Point, Scroll, TypeText
from holodesk.automation.coords import (
    FrameMapping,
    ImagePixelSpace,
    Monitor,
    NormalizedSpace,
    Rect,
    action_to_model,
    action_to_screen,
    logical_to_screen,
    monitor_at,
    screen_to_logical,
    virtual_desktop,
)
from holodesk.automation.errors import OffScreenError

NORM = NormalizedSpace()
PIXELS = ImagePixelSpace()

# A monitor left of the primary (negative offset, scale 1), the primary at 2x, and one above at 1.25.
LEFT = Monitor(1, Rect(-1920, 0, 1920, 1080), 1.0, "LEFT")
PRIMARY = Monitor(2, Rect(0, 0, 2880, 1800), 2.0, "PRIMARY", is_primary=True)
ABOVE = Monitor(3, Rect(0, -1024, 1366, 1024), 1.25, "ABOVE")
MONITORS = (LEFT, PRIMARY, ABOVE)

# Regions captured and the image sizes the model saw (odd sizes on purpose).
MAPPINGS = [
    FrameMapping(LEFT.rect, 1920, 1080),
    FrameMapping(LEFT.rect, 1280, 720),
    FrameMapping(PRIMARY.rect, 1437, 899),
    FrameMapping(ABOVE.rect, 1366, 1024),
    FrameMapping(ABOVE.rect, 683, 511),
    FrameMapping(Rect(-1920, -1024, 4800, 2824), 1199, 707),  # the whole desktop, resized
    FrameMapping(Rect(5, 7, 1, 1), 1, 1),
]


def _sample_points(rect: Rect) -> list[Point]:
    xs = {rect.left, rect.left + 1, rect.left + rect.width // 2, rect.right - 2, rect.right - 1}
    ys = {rect.top, rect.top + 1, rect.top + rect.height // 3, rect.bottom - 2, rect.bottom - 1}
    return [Point(x, y) for x in xs for y in ys if rect.contains(Point(x, y))]


@pytest.mark.parametrize("mapping", MAPPINGS, ids=str)
def test_screen_to_image_to_screen_stays_within_one_image_pixel(mapping):
    step_x = mapping.region.width / mapping.image_width
    step_y = mapping.region.height / mapping.image_height
    for point in _sample_points(mapping.region):
        back = mapping.image_to_screen(mapping.screen_to_image(point))
        assert mapping.region.contains(back)
        assert abs(back.x - point.x) <= math.ceil(step_x / 2)
        assert abs(back.y - point.y) <= math.ceil(step_y / 2)


@pytest.mark.parametrize("mapping", MAPPINGS, ids=str)
def test_normalized_round_trip_stays_within_the_model_grid(mapping):
    # One normalized unit is region/1000 screen pixels; the image grid adds at most one image pixel.
    tol_x = math.ceil(mapping.region.width / 1000) + math.ceil(mapping.region.width / mapping.image_width)
    tol_y = math.ceil(mapping.region.height / 1000) + math.ceil(mapping.region.height / mapping.image_height)
    for point in _sample_points(mapping.region):
        model = mapping.screen_to_model(point, NORM)
        assert 0 <= model.x <= 1000 and 0 <= model.y <= 1000
        back = mapping.model_to_screen(model, NORM)
        assert mapping.region.contains(back)
        assert abs(back.x - point.x) <= tol_x
        assert abs(back.y - point.y) <= tol_y


@pytest.mark.parametrize("mapping", MAPPINGS, ids=str)
def test_image_pixel_space_is_the_image_itself(mapping):
    corner = Point(mapping.image_width - 1, mapping.image_height - 1)
    assert mapping.model_to_image(corner, PIXELS) == corner
    assert mapping.image_to_model(corner, PIXELS) == corner


def test_normalized_edges_land_on_the_first_and_last_pixels():
    mapping = FrameMapping(LEFT.rect, 1280, 720)
    assert mapping.model_to_screen(Point(0, 0), NORM) == Point(-1920, 0)
    assert mapping.model_to_screen(Point(1000, 1000), NORM) == Point(-1, 1079)
    assert mapping.model_to_screen(Point(500, 500), NORM) == Point(-960, 540)


def test_resized_image_pixel_maps_to_the_centre_of_its_screen_block():
    # 2x downscale: image pixel (10, 20) covers screen pixels 20..21 x 40..41 of a monitor at x=-1920.
    mapping = FrameMapping(LEFT.rect, 960, 540)
    assert mapping.image_to_screen(Point(10, 20)) == Point(-1920 + 21, 41)
    assert mapping.screen_to_image(Point(-1920 + 20, 40)) == Point(10, 20)
    assert mapping.screen_to_image(Point(-1920 + 21, 41)) == Point(10, 20)


@pytest.mark.parametrize(
    ("point", "space", "message"),
    [
        (Point(1001, 5), NORM, r"model x=1001 is outside \[0, 1000\]"),
        (Point(5, -1), NORM, r"model y=-1 is outside \[0, 1000\]"),
        (Point(1280, 5), PIXELS, "outside the 1280x720 image"),
        (Point(-1, 5), PIXELS, "outside the 1280x720 image"),
    ],
)
def test_model_points_outside_their_range_are_rejected(point, space, message):
    with pytest.raises(OffScreenError, match=message):
        FrameMapping(LEFT.rect, 1280, 720).model_to_screen(point, space)


def test_screen_points_outside_the_region_are_rejected():
    mapping = FrameMapping(LEFT.rect, 1280, 720)
    with pytest.raises(OffScreenError, match="outside the captured region"):
        mapping.screen_to_image(Point(0, 0))  # the first pixel of the next monitor


def test_monitor_at_finds_the_monitor_and_rejects_gaps():
    assert monitor_at(Point(-1, 1079), MONITORS) is LEFT
    assert monitor_at(Point(0, 0), MONITORS) is PRIMARY
    assert monitor_at(Point(1365, -1), MONITORS) is ABOVE
    # Right of ABOVE and above PRIMARY is a hole in the virtual desktop.
    with pytest.raises(OffScreenError, match=r"\(2000, -10\) is on no monitor"):
        monitor_at(Point(2000, -10), MONITORS)
    with pytest.raises(OffScreenError, match="no monitors"):
        monitor_at(Point(0, 0), ())


def test_action_to_screen_maps_every_point_and_checks_monitors():
    mapping = FrameMapping(virtual_desktop(MONITORS), 1000, 1000)
    drag = Drag(Point(0, 500), Point(999, 999))
    screen = action_to_screen(drag, PIXELS, mapping, MONITORS)
    assert screen.start.x < 0  # on LEFT
    assert PRIMARY.rect.contains(screen.end)
    # The top-right corner of the bounding box is in the hole: refused before any input is sent.
    with pytest.raises(OffScreenError, match="on no monitor"):
        action_to_screen(Click(Point(999, 0)), PIXELS, mapping, MONITORS)
    # Actions without points pass through untouched.
    assert action_to_screen(Scroll("down"), NORM, mapping, MONITORS) == Scroll("down")


def test_action_to_model_inverts_action_to_screen_for_an_edited_target():
    mapping = FrameMapping(PRIMARY.rect, 1437, 899)
    typed = TypeText("hi", Point(250, 750))
    screen = action_to_screen(typed, NORM, mapping, MONITORS)
    back = action_to_model(screen, NORM, mapping)
    assert back.text == "hi"
    assert abs(back.at.x - 250) <= 1 and abs(back.at.y - 750) <= 1


@pytest.mark.parametrize("monitor", MONITORS, ids=lambda m: m.name)
def test_logical_round_trip_is_exact_on_every_scale(monitor):
    for point in _sample_points(monitor.rect):
        lx, ly = screen_to_logical(point, monitor)
        assert logical_to_screen(lx, ly, monitor) == point


def test_logical_coordinates_keep_the_monitor_origin_and_divide_distances():
    assert screen_to_logical(Point(0, 0), PRIMARY) == (0.0, 0.0)
    assert screen_to_logical(Point(2879, 1799), PRIMARY) == (1439.5, 899.5)
    assert screen_to_logical(Point(-1920, 0), LEFT) == (-1920.0, 0.0)
    assert screen_to_logical(Point(125, -1024 + 250), ABOVE) == (100.0, -1024 + 200.0)
    # Any logical position inside a physical pixel maps to that pixel (1.25: pixel 1 starts at 0.8).
    assert logical_to_screen(0.8, -1024.0, ABOVE) == Point(1, -1024)
    assert logical_to_screen(0.79, -1024.0, ABOVE) == Point(0, -1024)


def test_virtual_desktop_bounds_all_monitors():
    assert virtual_desktop(MONITORS) == Rect(-1920, -1024, 4800, 2824)
    with pytest.raises(OffScreenError):
        virtual_desktop(())


@pytest.mark.parametrize(
    "make",
    [
        lambda: Rect(0, 0, 0, 10),
        lambda: Rect(0, 0, 10, -1),
        lambda: Rect(0.5, 0, 10, 10),
        lambda: Monitor(1, Rect(0, 0, 1, 1), 0.0),
        lambda: Monitor(1, Rect(0, 0, 1, 1), math.nan),
        lambda: FrameMapping(Rect(0, 0, 1, 1), 0, 5),
    ],
)
def test_impossible_geometry_is_rejected(make):
    with pytest.raises(ValueError):
        make()


def test_remap_point_between_the_portal_layout_and_a_logical_xwayland_screen():
    from holodesk.automation.coords import Monitor, Rect, layouts_match, remap_point

    # Two monitors: 2560x1600 at 200% and 1920x1080 at 100%, as the portal gives them (physical
    # pixels) and as mutter < 47 with fractional scaling gives XWayland (logical pixels).
    portal = [Monitor(1, Rect(0, 0, 2560, 1600), 2.0), Monitor(2, Rect(2560, 0, 1920, 1080), 1.0)]
    x_screen = [Monitor(2, Rect(1280, 0, 1920, 1080)), Monitor(1, Rect(0, 0, 1280, 800))]
    assert not layouts_match(portal, x_screen)
    assert remap_point(Point(1001, 601), portal, x_screen) == Point(500, 300)
    assert remap_point(Point(2559, 1599), portal, x_screen) == Point(1279, 799)
    assert remap_point(Point(2560 + 17, 33), portal, x_screen) == Point(1280 + 17, 33)
    assert remap_point(Point(500, 300), x_screen, portal) == Point(1001, 601)  # the pixel's centre
    with pytest.raises(OffScreenError, match="on no monitor"):
        remap_point(Point(3000, 1500), portal, x_screen)
    with pytest.raises(OffScreenError, match="2 monitor"):
        remap_point(Point(1, 1), portal, x_screen[:1])
    assert layouts_match(portal, list(reversed(portal)))
