"""Writing an approved repair back into a routine, as a change a person can review.

The step keeps its action, moved to where the target was found; its crops are taken again from
the frame the repair was found on (new files: the old pictures stay for the older revision). The
routine's previous file is kept under `revisions/` and the change is returned as a unified diff of
the two files, which the front end shows.
"""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from PIL import Image

from holodesk.automation.actions import Point
from holodesk.automation.routines.compiler import CONTEXT_SIZE, CROP_SIZE
from holodesk.automation.routines.routine_file import (
    CROPS_DIR,
    REVISIONS_DIR,
    ROUTINE_FILE,
    Routine,
    RoutineStep,
    routine_to_toml,
    write_routine,
)
from holodesk.automation.screen import ScreenFrame


@dataclass(frozen=True, slots=True)
class ProposedRepair:
    """The routine as it would be with one step repaired, the diff to review, and the new crops."""

    routine: Routine
    step: RoutineStep
    diff: str
    pictures: dict[str, Image.Image]


def repaired_step(
    step: RoutineStep, point: Point, frame: ScreenFrame, stamp: str
) -> tuple[RoutineStep, dict[str, Image.Image]]:
    """`step` with its target at `point` and its crops re-taken from `frame` (the new pictures)."""
    assert step.target is not None
    picture = frame.to_image()
    pictures: dict[str, Image.Image] = {}
    local = (point.x - frame.region.left, point.y - frame.region.top)
    names: dict[str, str] = {}
    offsets: dict[str, tuple[int, int]] = {}
    for kind, size in (("crop", CROP_SIZE), ("context", CONTEXT_SIZE)):
        width, height = min(size[0], picture.width), min(size[1], picture.height)
        left = min(max(0, local[0] - width // 2), picture.width - width)
        top = min(max(0, local[1] - height // 2), picture.height - height)
        suffix = "" if kind == "crop" else "-context"
        relative = f"{CROPS_DIR}/step-{step.number:02d}{suffix}-repair-{stamp}.png"
        pictures[relative] = picture.crop((left, top, left + width, top + height))
        names[kind] = relative
        offsets[kind] = (local[0] - left, local[1] - top)
    dx, dy = point.x - step.target.point[0], point.y - step.target.point[1]
    target = replace(
        step.target,
        point=(point.x, point.y),
        crop=names["crop"],
        crop_offset=offsets["crop"],
        context=names["context"],
        context_offset=offsets["context"],
    )
    action = step.action.map_points(lambda p: Point(p.x + dx, p.y + dy))
    return replace(step, action=action, target=target), pictures


def propose_repair(routine: Routine, step: RoutineStep, point: Point, frame: ScreenFrame) -> ProposedRepair:
    """The routine with `step` found at `point` on `frame`, as a diff against its file (nothing written)."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    new_step, pictures = repaired_step(step, point, frame, stamp)
    new = replace(routine, steps=tuple(new_step if s.number == step.number else s for s in routine.steps))
    old_text = routine_to_toml(routine)
    diff = "".join(
        difflib.unified_diff(
            old_text.splitlines(keepends=True),
            routine_to_toml(new).splitlines(keepends=True),
            fromfile=f"{ROUTINE_FILE} (now)",
            tofile=f"{ROUTINE_FILE} (repaired)",
        )
    )
    return ProposedRepair(new, new_step, diff, pictures)


def write_repair(proposed: ProposedRepair) -> Path:
    """Write an approved repair: the new crops, the previous file kept under revisions/ (its path returned)."""
    folder = proposed.routine.folder
    if folder is None:
        raise ValueError(f"the routine {proposed.routine.name!r} was not loaded from a folder")
    (folder / CROPS_DIR).mkdir(parents=True, exist_ok=True)
    for relative, picture in proposed.pictures.items():
        picture.save(folder / relative, format="PNG")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    previous = folder / REVISIONS_DIR / f"routine-{stamp}.toml"
    previous.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(folder / ROUTINE_FILE, previous)
    write_routine(proposed.routine, folder)
    return previous
