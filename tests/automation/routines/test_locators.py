"""The locator ladder on drawn screens: exact where recorded, moved, zoomed, ambiguous, and the model last."""

from __future__ import annotations

import numpy as np
import pytest

from bench.rigs.routine_scenes import Button, click_step, field_screen, record_session, screen
from holodesk.automation.actions import Point
from holodesk.automation.routines.compiler import compile_session
from holodesk.automation.routines.locators import (
    EXACT_DISTANCE,
    SELF_MATCH_RADIUS,
    Located,
    NotLocated,
    Rung,
    TargetLocator,
)
from holodesk.automation.screen import ScreenFrame

OK = Button("OK", 100, 100)
CANCEL = Button("Cancel", 300, 100)


@pytest.fixture
def ok_target(tmp_path):
    frame = screen([OK, CANCEL])
    session = record_session(tmp_path, "press ok", [(frame, click_step(*OK.centre, "the OK button"))], end=frame)
    compiled = compile_session(session, "ok")
    step = compiled.routine.steps[0]
    crop = np.asarray(compiled.pictures[step.target.crop])
    context = np.asarray(compiled.pictures[step.target.context])
    return step.target, crop, context


class PointingModel:
    """A grounder that answers a fixed point and remembers what it was asked."""

    def __init__(self, point: Point) -> None:
        self.point = point
        self.asked: list[str] = []

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        self.asked.append(description)
        return self.point


def test_the_screen_as_recorded_is_an_exact_match(ok_target):
    target, crop, context = ok_target
    found = TargetLocator(screen([OK, CANCEL])).locate(target, crop, context)
    assert isinstance(found, Located)
    assert (found.point, found.rung, found.exact) == (Point(*OK.centre), Rung.NEAR, True)


@pytest.mark.parametrize(("dx", "dy", "exact"), [(2, -2, True), (3, 0, False), (26, 0, False), (0, 26, False)])
def test_exact_only_within_the_documented_bound_and_a_target_26_px_away_is_found_nearby(ok_target, dx, dy, exact):
    """Issue 49: a target found 26 px away was called "found exactly where recorded" and offered approve-all."""
    target, crop, context = ok_target
    found = TargetLocator(screen([Button("OK", OK.left + dx, OK.top + dy), CANCEL])).locate(target, crop, context)
    assert isinstance(found, Located)
    assert (found.point, found.rung) == (Point(OK.centre[0] + dx, OK.centre[1] + dy), Rung.NEAR)
    assert found.score >= 0.99  # the picture matches perfectly: only the distance decides
    assert found.exact is exact and EXACT_DISTANCE == 2
    assert f"({dx:+d}, {dy:+d}) px from where recorded" in found.detail


def test_a_moved_target_is_found_anywhere_and_not_exact(ok_target):
    target, crop, context = ok_target
    moved = Button("OK", 520, 430)
    found = TargetLocator(screen([moved, CANCEL])).locate(target, crop, context)
    assert isinstance(found, Located)
    assert (found.point, found.rung, found.exact) == (Point(*moved.centre), Rung.ANYWHERE, False)


def test_a_zoomed_target_is_found_at_another_size(ok_target):
    target, crop, context = ok_target
    found = TargetLocator(screen([Button("OK", 400, 300)], scale=1.25)).locate(target, crop, context)
    assert isinstance(found, Located) and found.rung is Rung.ANYWHERE and "1.25x" in found.detail
    centre = (400 + round(110 * 1.25) // 2, 300 + round(36 * 1.25) // 2)
    assert abs(found.point.x - centre[0]) <= 3 and abs(found.point.y - centre[1]) <= 3


def test_two_identical_targets_away_from_the_recorded_spot_are_refused_not_guessed(ok_target):
    target, crop, context = ok_target
    found = TargetLocator(screen([Button("OK", 500, 300), Button("OK", 500, 450)])).locate(target, crop, context)
    assert isinstance(found, NotLocated) and found.ambiguous
    assert "ambiguous" in found.detail


def test_the_model_is_asked_only_when_the_pictures_fail(ok_target):
    target, crop, context = ok_target
    model = PointingModel(Point(640, 480))
    found = TargetLocator(screen([OK, CANCEL]), model).locate(target, crop, context)
    assert isinstance(found, Located) and found.rung is Rung.NEAR and model.asked == []
    locator = TargetLocator(screen([Button("Okay", 500, 300), CANCEL]), model)
    found = locator.locate(target, crop, context)
    assert isinstance(found, Located) and (found.rung, found.point, found.exact) == (Rung.MODEL, Point(640, 480), False)
    assert model.asked == ["the OK button"] and locator.model_calls == 1


def test_a_target_that_is_gone_is_not_found_without_the_model(ok_target):
    target, crop, context = ok_target
    found = TargetLocator(screen([CANCEL])).locate(target, crop, context)
    assert isinstance(found, NotLocated) and not found.ambiguous
    assert "not near the recorded spot" in found.detail and "not on the screen" in found.detail


@pytest.mark.parametrize("label", ["Cancel", "Okay", "OK!"])
def test_a_button_with_another_label_is_never_taken_for_the_target(ok_target, label):
    target, crop, context = ok_target
    for scale in (1.0, 1.25, 0.8):
        found = TargetLocator(screen([Button(label, 420, 260)], scale=scale)).locate(target, crop, context)
        assert isinstance(found, NotLocated), (label, scale, found)


@pytest.mark.parametrize("label", ["UK", "KO", "O K"])
def test_a_zoomed_button_with_a_similar_label_is_refused_by_its_edges(ok_target, label):
    # Zoomed, these labels pass the grey threshold (0.94-0.95): only the edge check tells them apart.
    target, crop, context = ok_target
    for scale in (1.25, 1.5):
        found = TargetLocator(screen([Button(label, 420, 260)], scale=scale)).locate(target, crop, context)
        assert isinstance(found, NotLocated), (label, scale, found)
        assert "not on the screen" in found.detail


def test_a_wide_plain_field_moved_elsewhere_is_found_once_not_twice_along_itself(tmp_path):
    # A crop of the field's middle shows only its top and bottom borders and slides along them: it
    # matches twice on the very screen it was taken from. The compiler grows it until it holds the
    # field's ends, so the field is found where it moved, once.
    recorded = field_screen(100, 100)
    session = record_session(
        tmp_path, "focus the field", [(recorded, click_step(265, 130, "the text field"))], recorded
    )
    compiled = compile_session(session, "field")
    target = compiled.routine.steps[0].target
    crop = np.asarray(compiled.pictures[target.crop])
    assert crop.shape[1] > 300  # nearly the whole field: it cannot slide along it
    context = np.asarray(compiled.pictures[target.context])
    found = TargetLocator(field_screen(300, 380)).locate(target, crop, context)
    assert isinstance(found, Located), found
    assert found.rung is Rung.ANYWHERE
    assert abs(found.point.x - 465) <= SELF_MATCH_RADIUS and found.point.y == 410


@pytest.mark.parametrize("label", ["Okay", "Cancel"])
def test_leaving_out_focus_rings_does_not_find_a_button_whose_label_differs(ok_target, label):
    """The focus rung compares edges: a focus ring or a caret does not decide, a label's strokes do."""
    target, crop, context = ok_target
    found = TargetLocator(screen([Button(label, 300, 300)])).locate(target, crop, context)
    assert isinstance(found, NotLocated), found
    assert "without focus rings and carets either" in found.detail
