"""Finding a step's target again: a ladder of locators, cheapest first, that refuses to guess.

1. `near`: the target's crop, searched around the recorded spot. A match with a high score
   (EXACT_SCORE) at most EXACT_DISTANCE pixels from the recorded point, each way, is EXACT (the
   screen is as recorded); only these steps may be approved together. A match further away (up to
   NEAR_MARGIN) is "found nearby" and always shown.
2. `anywhere`: the crop over the whole screen (the window moved, the page laid itself out anew),
   at the recorded size first, then a few zoom factors.
3. `context`: the wider crop around the target over the whole screen, a landmark for a target whose
   own picture is plain (two identical check boxes: their labels tell them apart).
4. `focus`: the target's pictures compared on their edges, so that a focus ring (a border that
   changes colour where the border was) and a caret (a thin column) do not decide the match: a
   field recorded with the focus is found without it, and the other way round. Its match must
   also agree on grey pictures with thin lines taken out (FOCUS_GREY_SCORE); it is never exact.
5. the model (`Grounder`), from the target's description; only where the caller gives one.

A rung whose best match is not clearly better than the next one elsewhere is ambiguous and gives
way to the next rung; a target that no rung finds unambiguously is refused (the replay asks the
user). OpenCV's normalised cross-correlation (TM_CCOEFF_NORMED) on grey images does the matching.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import cv2
import numpy as np

from holodesk.automation.actions import Point
from holodesk.automation.routines.routine_file import Target
from holodesk.automation.screen import ScreenFrame

# Calibrated on drawn buttons: the same rendering scores above 0.99; a button whose label differs
# ("OK" and "Okay", same size and colour) scores up to 0.95, so anything under 0.97 is no match.
MATCH_SCORE = 0.97
EXACT_SCORE = 0.99  # a match near the recorded spot at least this good is the screen as recorded
# ... and only within this many pixels of the recorded point, in x and in y: a window that kept its
# place (a toolkit may round a size by a pixel or two) is exact; one that moved 26 px is not.
EXACT_DISTANCE = 2
# A zoomed page is rendered anew, not resized: its true matches score 0.94-0.96 on grey, as a wrong
# label does at the recorded size. A zoomed match must therefore also match on edges (the label's
# strokes weigh more there): a true one scores 0.95-0.99, a wrong label under 0.90.
ZOOM_GREY_SCORE = 0.93
ZOOM_EDGE_SCORE = 0.93
EDGE_PAD = 8
EDGE_SHIFT = 3
# The focus rung, calibrated on a real Qt field recorded focused and seen unfocused (and back): its
# crop and context score 0.99 on edges and 0.95-0.98 on thinned grey; a button whose label differs
# ("OK" recorded, "Okay" now) scores 0.89 (crop) and 0.95 (context) on edges, a GTK dialog's OK
# button relabelled 0.89, so an edge match under 0.97 is no match.
FOCUS_EDGE_SCORE = 0.97
FOCUS_GREY_SCORE = 0.93
FOCUS_AGREE_PX = 3  # the edge match and the thinned-grey match must be this close
THIN_LINE_KERNEL = np.ones((3, 3), np.uint8)  # closing then opening with it removes lines of 1-2 px
AMBIGUITY_MARGIN = 0.04  # a second match elsewhere within this of the best: two candidates, refuse
SELF_MATCH_RADIUS = 6  # a crop's own place, give or take this many pixels (see matches_elsewhere)
NEAR_MARGIN = 48  # pixels around the recorded crop searched by the first rung
ZOOM_FACTORS = (0.8, 0.9, 1.1, 1.25, 1.5)  # tried by `anywhere` when the recorded size finds nothing


class Rung(StrEnum):
    NEAR = "template near the recorded spot"
    ANYWHERE = "template anywhere on the screen"
    CONTEXT = "landmarks around the target"
    FOCUS = "its pictures without focus rings and carets"
    MODEL = "the model"


class Grounder(Protocol):
    """Locates a described element on a frame (the model's `locate`); screen-space point, or raises."""

    def locate(self, frame: ScreenFrame, description: str) -> Point: ...


@dataclass(frozen=True, slots=True)
class Located:
    """Where the target is now, found by `rung`; `exact` steps can be approved together."""

    point: Point
    rung: Rung
    score: float
    exact: bool
    detail: str


@dataclass(frozen=True, slots=True)
class NotLocated:
    """No rung found the target unambiguously; `detail` says what each rung saw."""

    detail: str
    ambiguous: bool


@dataclass(frozen=True, slots=True)
class _Match:
    score: float
    second: float  # the best score outside the best match's neighbourhood
    left: int  # top-left of the match, in the searched image
    top: int


def grey_frame(frame: ScreenFrame) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(frame.pixels), cv2.COLOR_BGRA2GRAY)


def grey_picture(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb[:, :, :3]), cv2.COLOR_RGB2GRAY)


def _best_two(image: np.ndarray, template: np.ndarray) -> _Match | None:
    """The best match of `template` in `image` and the best score away from it (None if it cannot fit)."""
    if template.shape[0] > image.shape[0] or template.shape[1] > image.shape[1]:
        return None
    scores = cv2.matchTemplate(image, template, cv2.TM_CCOEFF_NORMED)
    scores = np.nan_to_num(scores, nan=-1.0, posinf=-1.0, neginf=-1.0)
    _, best, _, (left, top) = cv2.minMaxLoc(scores)
    # Blank out the best match's neighbourhood (half a template each way): the peak's own shoulders
    # are the same place, not a second candidate.
    half_w, half_h = max(1, template.shape[1] // 2), max(1, template.shape[0] // 2)
    masked = scores.copy()
    masked[max(0, top - half_h) : top + half_h + 1, max(0, left - half_w) : left + half_w + 1] = -1.0
    second = float(masked.max()) if masked.size else -1.0
    return _Match(float(best), second, int(left), int(top))


def matches_elsewhere(screen: np.ndarray, template: np.ndarray, at: tuple[int, int]) -> bool:
    """Whether `template` (grey), taken from `screen` (grey) at `at` (left, top), matches anywhere else
    about as well: more than SELF_MATCH_RADIUS pixels away, within AMBIGUITY_MARGIN of its own score.

    The compiler asks this on the recorded screen itself: a crop that slides along a wide plain
    field (or repeats) would be refused or misplaced at replay, so it is grown first.
    """
    if _flat(template) or template.shape[0] > screen.shape[0] or template.shape[1] > screen.shape[1]:
        return True
    scores = np.nan_to_num(cv2.matchTemplate(screen, template, cv2.TM_CCOEFF_NORMED), nan=-1.0)
    own = float(scores[at[1], at[0]])
    r = SELF_MATCH_RADIUS
    scores[max(0, at[1] - r) : at[1] + r + 1, max(0, at[0] - r) : at[0] + r + 1] = -1.0
    return float(scores.max()) >= own - AMBIGUITY_MARGIN


def _flat(template: np.ndarray) -> bool:
    """A template of one colour matches anywhere (and NCC is undefined on it)."""
    return float(template.std()) < 2.0


def _thinned(grey: np.ndarray) -> np.ndarray:
    """`grey` without lines 1-2 px thin, dark or light (a caret, a focus ring's colour, a border)."""
    closed = cv2.morphologyEx(grey, cv2.MORPH_CLOSE, THIN_LINE_KERNEL)
    return cv2.morphologyEx(closed, cv2.MORPH_OPEN, THIN_LINE_KERNEL)


def _edges(grey: np.ndarray) -> np.ndarray:
    """Canny edges, blurred so that strokes one pixel apart still overlap."""
    return cv2.GaussianBlur(cv2.Canny(grey, 50, 150), (5, 5), 0)


class TargetLocator:
    """Runs the ladder for one frame; construct once per frame (the grey frame is computed once)."""

    def __init__(self, frame: ScreenFrame, grounder: Grounder | None = None) -> None:
        self.frame = frame
        self.grey = grey_frame(frame)
        self.grounder = grounder
        self.model_calls = 0
        self._screen_edges: np.ndarray | None = None  # computed when the focus rung is reached

    def locate(self, target: Target, crop: np.ndarray, context: np.ndarray | None) -> Located | NotLocated:
        """`crop` and `context` are the target's recorded pictures (RGB arrays)."""
        said: list[str] = []
        template = grey_picture(crop)
        context_template = grey_picture(context) if context is not None else None
        pictures = [(template, target.crop_offset, Rung.ANYWHERE, "the target")]
        if context_template is not None:
            pictures.append((context_template, target.context_offset, Rung.CONTEXT, "the target's surroundings"))
        usable = [p for p in pictures if not _flat(p[0])]
        if len(usable) < len(pictures):
            said.append("a recorded picture is one plain colour")
        # Near the recorded spot first (the target, then its surroundings: a plain field matches
        # itself a little to either side, its surroundings do not), then anywhere.
        for picture, offset, _, what in usable:
            found = self._near(target, picture, offset, what)
            if isinstance(found, Located):
                return found
            said.append(found)
        for picture, offset, rung, _ in usable:
            found = self._anywhere(picture, offset, rung)
            if isinstance(found, Located):
                return found
            said.append(found)
        for picture, offset, _, what in usable:
            found = self._without_focus(picture, offset, what)
            if isinstance(found, Located):
                return found
            said.append(found)
        ambiguous = any("ambiguous" in text for text in said)
        if self.grounder is not None and target.element:
            self.model_calls += 1
            try:
                point = self.grounder.locate(self.frame, target.element)
            except Exception as exc:  # the model's failure is said, like any rung's
                said.append(f"the model could not locate {target.element!r}: {exc}")
                return NotLocated("; ".join(said), ambiguous)
            return Located(point, Rung.MODEL, 0.0, False, f"the model located {target.element!r}")
        if self.grounder is not None:
            said.append("the step has no description for the model to look for")
        return NotLocated("; ".join(said), ambiguous)

    def _near(self, target: Target, template: np.ndarray, offset: tuple[int, int], what: str) -> Located | str:
        region = self.frame.region
        height, width = template.shape
        left = target.point[0] - region.left - offset[0] - NEAR_MARGIN
        top = target.point[1] - region.top - offset[1] - NEAR_MARGIN
        x0, y0 = max(0, left), max(0, top)
        x1 = min(self.grey.shape[1], left + width + 2 * NEAR_MARGIN)
        y1 = min(self.grey.shape[0], top + height + 2 * NEAR_MARGIN)
        if x1 - x0 < width or y1 - y0 < height:
            return f"the recorded spot of {what} is off this screen"
        match = _best_two(self.grey[y0:y1, x0:x1], template)
        if match is None or match.score < MATCH_SCORE:
            score = f" (best {match.score:.2f})" if match else ""
            return f"{what} is not near the recorded spot{score}"
        if match.second >= match.score - AMBIGUITY_MARGIN:
            return f"{what} matches twice near the recorded spot ({match.score:.2f} and {match.second:.2f})"
        point = Point(region.left + x0 + match.left + offset[0], region.top + y0 + match.top + offset[1])
        dx, dy = point.x - target.point[0], point.y - target.point[1]
        exact = match.score >= EXACT_SCORE and max(abs(dx), abs(dy)) <= EXACT_DISTANCE
        where = "where recorded" if dx == dy == 0 else f"({dx:+d}, {dy:+d}) px from where recorded"
        return Located(point, Rung.NEAR, match.score, exact, f"{what} matched {where} (score {match.score:.2f})")

    def _anywhere(self, template: np.ndarray, offset: tuple[int, int], rung: Rung) -> Located | str:
        what = "the target" if rung is Rung.ANYWHERE else "the target's surroundings"
        best_seen = -1.0
        for zoom in (1.0, *ZOOM_FACTORS):
            scaled = template if zoom == 1.0 else cv2.resize(template, None, fx=zoom, fy=zoom)
            match = _best_two(self.grey, scaled)
            if match is None:
                continue
            best_seen = max(best_seen, match.score)
            if match.score < (MATCH_SCORE if zoom == 1.0 else ZOOM_GREY_SCORE):
                continue
            if zoom != 1.0 and not self._edges_agree(scaled, match):
                continue
            if match.second >= match.score - AMBIGUITY_MARGIN:
                return f"{what} is ambiguous on the screen: two matches ({match.score:.2f} and {match.second:.2f})"
            point = Point(
                self.frame.region.left + match.left + round(offset[0] * zoom),
                self.frame.region.top + match.top + round(offset[1] * zoom),
            )
            scale = "" if zoom == 1.0 else f" at {zoom:g}x its recorded size"
            return Located(point, rung, match.score, False, f"found {what}{scale} (score {match.score:.2f})")
        return f"{what} is not on the screen (best {best_seen:.2f})"

    def _without_focus(self, template: np.ndarray, offset: tuple[int, int], what: str) -> Located | str:
        """The focus rung: `template` found on edges, confirmed on thinned grey (see FOCUS_EDGE_SCORE)."""
        template_edges = _edges(template)
        if _flat(template_edges):
            return f"{what} has no edges to compare without focus rings"
        if self._screen_edges is None:
            self._screen_edges = _edges(self.grey)
        match = _best_two(self._screen_edges, template_edges)
        if match is None or match.score < FOCUS_EDGE_SCORE:
            score = f" (best {match.score:.2f})" if match else ""
            return f"{what} is not on the screen without focus rings and carets either{score}"
        if match.second >= match.score - AMBIGUITY_MARGIN:
            return (
                f"{what} is ambiguous on the screen without focus rings: two matches ({match.score:.2f} and"
                f" {match.second:.2f})"
            )
        height, width = template.shape
        pad = FOCUS_AGREE_PX
        top, left = max(0, match.top - pad), max(0, match.left - pad)
        patch = _thinned(self.grey[top : match.top + height + pad, left : match.left + width + pad])
        grey = _best_two(patch, _thinned(template))
        if grey is None or grey.score < FOCUS_GREY_SCORE:
            score = f" {grey.score:.2f}" if grey else ""
            return f"{what} matched on edges ({match.score:.2f}) but not on its shades ({score.strip() or 'none'})"
        point = Point(self.frame.region.left + match.left + offset[0], self.frame.region.top + match.top + offset[1])
        return Located(
            point,
            Rung.FOCUS,
            match.score,
            False,
            f"found {what} without focus rings and carets (edges {match.score:.2f}, shades {grey.score:.2f})",
        )

    def _edges_agree(self, template: np.ndarray, match: _Match) -> bool:
        """Whether the matched patch has the template's edges (see ZOOM_EDGE_SCORE)."""
        height, width = template.shape
        pad = EDGE_PAD  # edges at a patch's border are not the screen's: take them from a wider patch
        top, left = max(0, match.top - pad), max(0, match.left - pad)
        patch = _edges(self.grey[top : match.top + height + pad, left : match.left + width + pad])
        # A zoomed rendering's strokes sit a pixel or two off the resized template's: allow that.
        shift = EDGE_SHIFT
        y0, x0 = max(0, match.top - top - shift), max(0, match.left - left - shift)
        patch = patch[y0 : match.top - top + height + shift, x0 : match.left - left + width + shift]
        if patch.shape[0] < height or patch.shape[1] < width:
            return False
        score = cv2.matchTemplate(patch, _edges(template), cv2.TM_CCOEFF_NORMED)
        return float(np.nan_to_num(score).max()) >= ZOOM_EDGE_SCORE
