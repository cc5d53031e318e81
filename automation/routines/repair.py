"""Writing an approved repair back into a routine, as a change a person can review.

The step keeps its action, moved to where the target was found; its crops are taken again from
the frame the repair was found on (new files: the old pictures stay for the older revision). The
routine's previous file is kept under `revisions/` and the change is returned as a unified diff of
the two files, which the front end shows.

A step is repaired once: a repair is offered only because the step's pictures were not found and
the model was asked, so a step whose repaired pictures are not found again shows a picture that
changes from run to run (a terminal's lines that scroll on, a prompt with a counter or a clock).
Saving yet another picture of it would only fail the same way on the next run: such a step is not
repaired again, and the replay says why (`CannotRepair`).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np
from PIL import Image

from holodesk.automation.actions import Point
from holodesk.automation.errors import AutomationError
from holodesk.automation.routines.compiler import take_target, unfindable_words
from holodesk.automation.routines.pictures import featureless, private_folder, save_png, write_private
from holodesk.automation.routines.routine_file import (
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


class CannotRepair(AutomationError):
    """A repair that would write pictures no replay could find again; nothing is offered."""


REPAIR_SUFFIX = "-repair-"  # in the names of the crops a repair wrote: `crops/step-01-repair-STAMP.png`


def repaired_before(step: RoutineStep) -> bool:
    """Whether `step`'s target pictures are ones a repair wrote (see the module's docstring)."""
    return step.target is not None and REPAIR_SUFFIX in step.target.crop


def repaired_step(
    step: RoutineStep, point: Point, frame: ScreenFrame, stamp: str
) -> tuple[RoutineStep, dict[str, Image.Image]]:
    """`step` with its target at `point` and its crops re-taken from `frame` (the new pictures), taken
    as the compiler takes them; CannotRepair when the new crop is one plain colour, or the step was
    repaired before (its repaired pictures were not found this time either: they change between runs)."""
    assert step.target is not None
    if repaired_before(step):
        raise CannotRepair(
            f"step {step.number} was not repaired again: the pictures its last repair saved were not found this"
            " time either, so what they show changes from run to run (a terminal's lines scrolling on, a prompt"
            " with a counter or a clock); another picture of it would fail the same way. The model will find it"
            " on each run; to stop asking it, record the routine again on a steadier part of the window"
        )
    pictures: dict[str, Image.Image] = {}
    origin = (frame.region.left, frame.region.top)
    new_target = take_target(
        step.number,
        (frame.to_image(), origin),
        (point.x, point.y),
        step.target.element,
        pictures,
        f"{REPAIR_SUFFIX}{stamp}",
    )
    if featureless(np.asarray(pictures[new_target.crop])):
        raise CannotRepair(f"step {step.number} was not repaired: {unfindable_words(step.target.element)}")
    dx, dy = point.x - step.target.point[0], point.y - step.target.point[1]
    target = replace(
        step.target,
        point=new_target.point,
        crop=new_target.crop,
        crop_offset=new_target.crop_offset,
        context=new_target.context,
        context_offset=new_target.context_offset,
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
    for relative, picture in proposed.pictures.items():
        save_png(picture, folder / relative)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    previous = private_folder(folder / REVISIONS_DIR) / f"routine-{stamp}.toml"
    write_private(previous, (folder / ROUTINE_FILE).read_bytes())
    write_routine(proposed.routine, folder)
    return previous
