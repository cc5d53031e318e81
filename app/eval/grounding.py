"""Grounding sets in the ScreenSpot style: reading, scoring (point in box) and building them.

A set is JSONL, one item a line: `{"image": path, "instruction": text, "bbox": [left, top, right,
bottom], "category"?: text}`, the box in the image's own pixels (edges included), image paths
relative to the file. The model is asked where the described element is (the profile's
localization request); the answer scores when its point lies inside the box. An answer that cannot
be used (no point, out of range, a backend failure) scores as wrong and its reason is kept.

Sets are built from MiniWoB++ pages (each visible element with text: its DOM box, its text as
the instruction) and from the corrections a user exported (`holodesk export-corrections`: the
point they moved the target to, with a small box around it).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError

from holodesk.app.common.errors import HolodeskAppError
from holodesk.automation.coords import FrameMapping, Rect
from holodesk.automation.errors import AutomationError
from holodesk.automation.screen import ScreenFrame, frame_from_image
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

DEFAULT_CATEGORY = "all"
CORRECTION_BOX_RADIUS = 12  # px around a corrected point: about a small icon


class GroundingSetError(HolodeskAppError, ValueError):
    """A grounding file that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class GroundingItem:
    image: Path
    instruction: str
    bbox: tuple[int, int, int, int]  # left, top, right, bottom (inclusive), image pixels
    category: str = DEFAULT_CATEGORY

    def contains(self, x: int, y: int) -> bool:
        left, top, right, bottom = self.bbox
        return left <= x <= right and top <= y <= bottom

    def to_json(self, relative_to: Path) -> dict[str, Any]:
        try:
            image = str(self.image.relative_to(relative_to))
        except ValueError:
            image = str(self.image)
        return {"image": image, "instruction": self.instruction, "bbox": list(self.bbox), "category": self.category}


def read_grounding_set(path: Path) -> list[GroundingItem]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise GroundingSetError(f"cannot read {path}: {exc}") from exc
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise GroundingSetError(f"{where}: not a JSON line ({exc})") from None
        if not isinstance(record, dict):
            raise GroundingSetError(f"{where}: expected an object")
        image, instruction, bbox = record.get("image"), record.get("instruction"), record.get("bbox")
        if not isinstance(image, str) or not image or not isinstance(instruction, str) or not instruction.strip():
            raise GroundingSetError(f"{where}: 'image' and 'instruction' must be non-empty strings")
        if (
            not isinstance(bbox, list)
            or len(bbox) != 4
            or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in bbox)
        ):
            raise GroundingSetError(f"{where}: 'bbox' must be [left, top, right, bottom] in pixels")
        left, top, right, bottom = (round(v) for v in bbox)
        if right < left or bottom < top:
            raise GroundingSetError(f"{where}: the bbox {bbox} has its right/bottom before its left/top")
        category = record.get("category", DEFAULT_CATEGORY)
        items.append(GroundingItem(path.parent / image, instruction.strip(), (left, top, right, bottom), str(category)))
    if not items:
        raise GroundingSetError(f"{path} has no items")
    return items


def write_grounding_set(path: Path, items: Iterable[GroundingItem]) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item.to_json(path.parent), ensure_ascii=False) + "\n")
            count += 1
    return count


# --- scoring ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GroundingResult:
    category: str
    instruction: str
    image: str
    bbox: tuple[int, int, int, int]
    hit: bool
    point: tuple[int, int] | None
    error: str | None
    seconds: float


def score_item(policy: ModelPolicy, item: GroundingItem) -> GroundingResult:
    started = time.perf_counter()
    point: tuple[int, int] | None = None
    error: str | None = None
    try:
        with Image.open(item.image) as image:
            frame = frame_from_image(image)
        proposal = policy.locate(frame, item.instruction)
        (model_point,) = proposal.action.points()
        screen = FrameMapping(frame.region, proposal.image_width, proposal.image_height).model_to_screen(
            model_point, proposal.space
        )
        point = (screen.x, screen.y)
    except (OSError, UnidentifiedImageError) as exc:
        error = f"cannot read the image: {exc}"
    except (InferenceError, AutomationError, ValueError) as exc:  # an unusable answer scores as wrong
        error = f"unusable answer: {exc}"
    return GroundingResult(
        category=item.category,
        instruction=item.instruction,
        image=str(item.image),
        bbox=item.bbox,
        hit=point is not None and item.contains(*point),
        point=point,
        error=error,
        seconds=time.perf_counter() - started,
    )


@dataclass(slots=True)
class GroundingReport:
    results: list[GroundingResult]

    def categories(self) -> list[dict[str, Any]]:
        grouped: dict[str, list[GroundingResult]] = {}
        for result in self.results:
            grouped.setdefault(result.category, []).append(result)
        return [
            {
                "category": name,
                "items": len(found),
                "hits": sum(r.hit for r in found),
                "unusable": sum(r.error is not None for r in found),
                "accuracy": sum(r.hit for r in found) / len(found),
                "median_seconds": statistics.median(r.seconds for r in found),
            }
            for name, found in sorted(grouped.items())
        ]

    @property
    def accuracy(self) -> float:
        return sum(r.hit for r in self.results) / len(self.results) if self.results else 0.0

    def table(self) -> str:
        rows = [f"{'category':<24} {'items':>6} {'hits':>6} {'unusable':>8} {'accuracy':>8}"]
        for c in self.categories():
            rows.append(
                f"{c['category'][:24]:<24} {c['items']:>6} {c['hits']:>6} {c['unusable']:>8} {c['accuracy']:>8.1%}"
            )
        total_hits = sum(r.hit for r in self.results)
        rows.append(f"{'all':<24} {len(self.results):>6} {total_hits:>6} {'':>8} {self.accuracy:>8.1%}")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "accuracy": self.accuracy,
            "items": len(self.results),
            "categories": self.categories(),
            "results": [asdict(r) for r in self.results],
        }


def score_set(
    policy: ModelPolicy, items: Sequence[GroundingItem], on_result: Callable[[GroundingResult], None] | None = None
) -> GroundingReport:
    results = []
    for item in items:
        result = score_item(policy, item)
        results.append(result)
        if on_result is not None:
            on_result(result)
    return GroundingReport(results)


# --- building sets ------------------------------------------------------------------------------

# Elements a person would name by their text: buttons, links, tabs, headers, labels, options.
PAGE_ELEMENTS_JS = """
var wanted = '#area button, #area a, #area .alink, #area h3, #area label, #area span, #subbtn, #area li';
return Array.from(document.querySelectorAll(wanted)).filter(function (e) {
  var text = (e.innerText || '').trim();
  // The innermost element carrying the text (a tab's <a>, not its <li>).
  return text.length > 0 && text.length <= 40 &&
    !Array.from(e.children).some(function (c) { return (c.innerText || '').trim() === text; });
});
"""


def items_from_page(
    boxes: Iterable[Any], frame: ScreenFrame, image_path: Path, category: str
) -> Iterator[GroundingItem]:
    """Items for the elements `boxes` (ScreenBox: screen pixels) on a page captured as `frame`.

    Boxes are moved into the frame's own pixels; an element partly off the frame, or whose text
    appears twice on the page (an ambiguous instruction), is left out.
    """
    region: Rect = frame.region
    listed = [box for box in boxes if box.visible and box.text]
    texts = [box.text for box in listed]
    for box in listed:
        if texts.count(box.text) > 1:
            continue
        left, top = round(box.left) - region.left, round(box.top) - region.top
        right, bottom = round(box.left + box.width) - 1 - region.left, round(box.top + box.height) - 1 - region.top
        if left < 0 or top < 0 or right >= region.width or bottom >= region.height or right <= left or bottom <= top:
            continue
        yield GroundingItem(image_path, box.text, (left, top, right, bottom), category)


def items_from_corrections(path: Path, radius: int = CORRECTION_BOX_RADIUS) -> list[GroundingItem]:
    """Items from an export of the user's corrections: a box of `radius` px around each corrected point."""
    items = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            x, y = (int(v) for v in record["point"])
            image, instruction = Path(record["image"]), str(record["instruction"])
        except (ValueError, KeyError, TypeError) as exc:
            raise GroundingSetError(f"{path}:{number}: not a correction record ({exc})") from None
        if not instruction.strip():
            continue
        items.append(
            GroundingItem(
                image if image.is_absolute() else path.parent / image,
                instruction.strip(),
                (max(0, x - radius), max(0, y - radius), x + radius, y + radius),
                "correction",
            )
        )
    return items
