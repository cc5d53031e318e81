"""Drawn screens for routine tests: labelled buttons on a plain background, and sessions recorded on them.

A session is written with the trajectory writer the engine uses (one step line per action, its
screenshot, the decision and the result), so the compiler reads what a real run leaves on disk.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

from holodesk.automation.screen import ScreenFrame, frame_from_image
from holodesk.automation.trajectory import Session, TrajectoryWriter, read_session

SCREEN = (800, 600)
BUTTON = (110, 36)


@dataclass(frozen=True)
class Button:
    label: str
    left: int
    top: int

    @property
    def centre(self) -> tuple[int, int]:
        return self.left + BUTTON[0] // 2, self.top + BUTTON[1] // 2


def screen(
    buttons: Sequence[Button], *, scale: float = 1.0, background: tuple[int, int, int] = (236, 236, 236)
) -> ScreenFrame:
    image = Image.new("RGB", SCREEN, background)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=round(16 * scale))
    for button in buttons:
        width, height = round(BUTTON[0] * scale), round(BUTTON[1] * scale)
        box = (button.left, button.top, button.left + width, button.top + height)
        draw.rectangle(box, fill=(70, 110, 200), outline=(20, 40, 90), width=2)
        draw.text(
            (button.left + width // 2, button.top + height // 2), button.label, fill="white", font=font, anchor="mm"
        )
    return frame_from_image(image)


def field_screen(left: int, top: int, size: tuple[int, int] = (330, 60)) -> ScreenFrame:
    """A wide, empty text field (white, a thin grey border) on a light page: its inside is plain."""
    image = Image.new("RGB", SCREEN, (246, 246, 246))
    draw = ImageDraw.Draw(image)
    draw.rectangle((left, top, left + size[0], top + size[1]), fill="white", outline=(118, 118, 118), width=2)
    return frame_from_image(image)


def record_session(
    root: Path, task: str, steps: Sequence[tuple[ScreenFrame, dict[str, Any]]], end: ScreenFrame
) -> Session:
    """A finished session: each (frame, record) is one step; `end` is the final answer's screenshot."""
    writer = TrajectoryWriter.create(root, task)
    index = 0
    for index, (frame, fields) in enumerate(steps, start=1):
        record: dict[str, Any] = {"type": "step", "index": index, "task": task, **_region(frame), **fields}
        log = writer.begin_step(record, frame)
        if fields.get("decision") in ("approve", "edit"):
            result = record.pop("result")
            log.write_ahead()
            record["result"] = result
        log.close()
    final = {
        "type": "step",
        "index": index + 1,
        "task": task,
        **_region(end),
        "decision": "final",
        "action_model": {"kind": "done", "answer": ""},
    }
    writer.begin_step(final, end).close()
    writer.finish("done", "task finished", steps=index)
    return read_session(writer.folder)


def _region(frame: ScreenFrame) -> dict[str, Any]:
    r = frame.region
    return {"region": {"left": r.left, "top": r.top, "width": r.width, "height": r.height}}


def click_step(
    x: int, y: int, element: str, *, decision: str = "approve", ok: bool = True, **extra: Any
) -> dict[str, Any]:
    return {
        "action_model": {"kind": "click"},
        "action_screen": {"kind": "click", "at": [x, y], "button": "left", "count": 1},
        "element": element,
        "decision": decision,
        "result": {"ok": ok, "detail": "" if ok else "refused"},
        **extra,
    }
