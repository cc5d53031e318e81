"""Compile a finished session into a routine: the steps that ran, their targets, effects and parameters.

A step is kept when it acted and succeeded (approved or corrected by the user, result ok); skipped,
failed and interrupted steps are left out, and so are steps that do not touch the desktop (the plan,
the final answer). A corrected step keeps the correction (what ran). Each pointing step keeps a crop
of its target and a wider context crop from the step's own screenshot, and the region that changed
between that screenshot and the next one (its expected effect), leaving out where Holodesk's own
tray icon and windows were (the `own_regions` the engine records). Typed text that appears in the
task is proposed as a parameter. Each step left out is said, with why; a kept step that a replay
cannot do by itself (a one-colour crop, an effect with no screenshot to check it) is a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from holodesk.automation.actions import Action, KeyCombo, TypeText, action_from_dict
from holodesk.automation.errors import ActionError, AutomationError
from holodesk.automation.routines.effects import changed_box
from holodesk.automation.routines.locators import matches_elsewhere
from holodesk.automation.routines.pictures import MAX_PICTURE_PIXELS, featureless, private_folder, save_png
from holodesk.automation.routines.routine_file import (
    CROPS_DIR,
    ExpectedEffect,
    Parameter,
    Routine,
    RoutineStep,
    Target,
    check_name,
    write_routine,
)
from holodesk.automation.trajectory import Session

CROP_SIZE = (120, 48)  # width, height: a button or a field's label with a margin
# Inside a large plain element (a text field zoomed in) the first crop is one colour and matches
# anywhere: the crop grows until it shows an edge of its own (a grey-level spread above PLAIN_SPREAD).
LARGER_CROPS = ((200, 72), (280, 100), (360, 140))
PLAIN_SPREAD = 8.0
# A crop that matches twice on its own recorded screen (a wide field's crop slides along it) grows,
# wider before taller (a taller crop takes in more of the page around), until it is unique
# there. One that never is (two identical buttons) keeps its first size: the context, a landmark
# around it, then tells them apart or the replay refuses.
UNIQUE_CROPS = tuple((w, h) for h in (48, 72, 100) for w in range(160, 641, 40))  # in small steps: the
# first unique one is the tightest, and takes in the least of a page that may move around the target
CONTEXT_SIZE = (360, 200)  # a landmark around it, for when the crop alone matches twice
KEPT_DECISIONS = frozenset({"approve", "edit"})
NOT_DESKTOP_KINDS = frozenset({"done", "ask_user", "plan"})
# Words in a target's description that make a click irreversible: it is always asked at replay.
IRREVERSIBLE_WORDS = re.compile(
    r"\b(send|save|delete|submit|remove|pay|buy|purchase|post|publish|confirm|order|transfer|erase|discard|sign)\b",
    re.IGNORECASE,
)
IRREVERSIBLE_KEYS = frozenset({("ctrl", "s"), ("ctrl", "enter"), ("ctrl", "return"), ("shift", "delete")})
_FILLER_WORDS = frozenset({"the", "a", "an", "field", "input", "box", "text", "textbox", "area", "entry", "in", "of"})


@dataclass
class CompiledRoutine:
    """A routine ready to be written, its pictures, and what was left out (in words)."""

    routine: Routine
    pictures: dict[str, Image.Image] = field(default_factory=dict)
    left_out: list[str] = field(default_factory=list)
    # Steps kept that a replay cannot fully do by itself, in words: a target no picture can find
    # again, an effect that cannot be checked. Said at save time, not found out at replay.
    warnings: list[str] = field(default_factory=list)


class CompileError(AutomationError):
    """The session holds nothing a routine can replay; the message says why."""


def compile_session(session: Session, name: str) -> CompiledRoutine:
    check_name(name)
    frames: dict[int, tuple[Image.Image, tuple[int, int]]] = {}
    for position, step in enumerate(session.steps):
        picture = _screenshot(session.folder, step)
        if picture is not None:
            frames[position] = picture
    compiled = CompiledRoutine(Routine(name=name, task=session.task, steps=()))
    steps: list[RoutineStep] = []
    parameters: list[Parameter] = []
    for position, step in enumerate(session.steps):
        index = step.get("index", position + 1)
        reason = _left_out_because(step)
        if reason:
            if reason != "-":
                compiled.left_out.append(f"step {index}: {reason}")
            continue
        try:
            action = action_from_dict(step.get("edited_screen") or step["action_screen"])
        except (ActionError, KeyError) as exc:
            compiled.left_out.append(f"step {index}: its action cannot be read back ({exc})")
            continue
        number = len(steps) + 1
        before = frames.get(position)
        following = next((p for p in range(position + 1, len(session.steps)) if p in frames), None)
        after = frames[following] if following is not None else None
        # Holodesk's own tray icon and windows, where either screenshot had them: never an effect.
        own = _own_regions(step) + (_own_regions(session.steps[following]) if following is not None else [])
        element = str(step.get("element") or "")
        target = None
        points = action.points()
        if points:
            if before is None:
                compiled.left_out.append(
                    f"step {index}: its screenshot is missing, so its target cannot be found again"
                )
                continue
            target = take_target(number, before, (points[0].x, points[0].y), element, compiled.pictures)
            if featureless(np.asarray(compiled.pictures[target.crop])):
                compiled.warnings.append(f"step {number}: {unfindable_words(element)}")
        expect = _effect(before, after, target, own)
        if after is None:
            compiled.warnings.append(
                f"step {number}: its effect cannot be checked (the session has no screenshot after it);"
                " a replay will not know whether it worked"
            )
        elif before is not None and (before[1] != after[1] or before[0].size != after[0].size):
            compiled.warnings.append(
                f"step {number}: its effect cannot be checked (the screen's size or place changed after it);"
                " a replay will not know whether it worked"
            )
        text_parameter = ""
        if isinstance(action, TypeText) and action.text.strip() and action.text.strip() in session.task:
            text_parameter = _parameter_name(element, len(parameters) + 1, {p.name for p in parameters})
            parameters.append(
                Parameter(
                    text_parameter, action.text, f"typed at step {number}" + (f" into {element}" if element else "")
                )
            )
        steps.append(
            RoutineStep(
                number=number,
                action=action,
                target=target,
                expect=expect,
                text_parameter=text_parameter,
                irreversible=_irreversible(action, element),
                note=str(step.get("note") or ""),
            )
        )
    if not steps:
        why = "; ".join(compiled.left_out) or "it has no steps"
        raise CompileError(f"the session {session.folder.name} has no step a routine can replay ({why})")
    compiled.routine = Routine(
        name=name,
        task=session.task,
        steps=tuple(steps),
        parameters=tuple(parameters),
        source_session=session.folder.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    return compiled


def save_compiled(compiled: CompiledRoutine, root: Path, *, replace: bool = False) -> Path:
    """Write the routine and its pictures under `root/<name>`; FileExistsError unless `replace`."""
    folder = root / compiled.routine.name
    if folder.exists() and not replace:
        raise FileExistsError(f"a routine named {compiled.routine.name!r} exists already ({folder})")
    if not root.exists():
        private_folder(root)
    private_folder(folder)
    private_folder(folder / CROPS_DIR)
    for relative, picture in compiled.pictures.items():
        save_png(picture, folder / relative)
    write_routine(compiled.routine, folder)
    return folder


def unfindable_words(element: str) -> str:
    """Why a step's target cannot be found again by its pictures, and what will happen at replay."""
    where = (
        f"only the model can find it again, from its description {element!r} (a replay without the model stops"
        " there and asks)"
        if element
        else "no replay can find it again (it has no description for the model either): a replay stops there and asks"
    )
    return f"its target's picture is one plain colour (a click on a plain background): {where}"


def _left_out_because(step: Mapping[str, Any]) -> str:
    """Why a recorded step is not replayed ("-": a step with nothing to say, like the final answer)."""
    decision = step.get("decision")
    kind = (step.get("action_model") or {}).get("kind")
    if decision == "final" or kind in NOT_DESKTOP_KINDS:
        return "-"
    if step.get("interrupted"):
        return "it was interrupted before it finished"
    if decision not in KEPT_DECISIONS:
        return f"it was not performed (decision: {decision or 'none'})"
    result = step.get("result") or {}
    if not result.get("ok"):
        return f"it failed ({result.get('detail') or 'no result'})"
    if not step.get("action_screen"):
        return "it has no action in screen space"
    return ""


def _screenshot(folder: Path, step: Mapping[str, Any]) -> tuple[Image.Image, tuple[int, int]] | None:
    """The step's screenshot and where its top-left sits on the screen, or None when it is unusable."""
    shot = step.get("screenshot")
    if not isinstance(shot, str) or step.get("screenshot_error"):
        return None
    try:
        with Image.open(folder / shot) as image:
            if image.size[0] * image.size[1] > MAX_PICTURE_PIXELS:  # a bomb: refused before it is decoded
                return None
            picture = image.convert("RGB")
    except (OSError, Image.DecompressionBombError):
        return None
    region = step.get("region") or {}
    return picture, (int(region.get("left", 0)), int(region.get("top", 0)))


def _box_around(
    picture: Image.Image, origin: tuple[int, int], point: tuple[int, int], size: tuple[int, int]
) -> tuple[int, int, int, int]:
    """A `size` box centred on `point` (screen), moved inside the picture; in picture pixels."""
    width, height = min(size[0], picture.width), min(size[1], picture.height)
    x, y = point[0] - origin[0], point[1] - origin[1]
    left = min(max(0, x - width // 2), picture.width - width)
    top = min(max(0, y - height // 2), picture.height - height)
    return left, top, left + width, top + height


def take_target(
    number: int,
    before: tuple[Image.Image, tuple[int, int]],
    point: tuple[int, int],
    element: str,
    pictures: dict[str, Image.Image],
    suffix: str = "",
) -> Target:
    """The target at `point` on the screenshot `before` (picture, its top-left on the screen): its
    crop (grown until it is not plain and matches only once) and context, added to `pictures`."""
    picture, origin = before
    local = (point[0] - origin[0], point[1] - origin[1])
    crop_box = _box_around(picture, origin, point, CROP_SIZE)
    for size in LARGER_CROPS:
        if float(np.asarray(picture.crop(crop_box).convert("L")).std()) > PLAIN_SPREAD:
            break
        crop_box = _box_around(picture, origin, point, size)
    crop_box = _unique_crop(picture, origin, point, crop_box)
    context_box = _box_around(picture, origin, point, CONTEXT_SIZE)
    crop = f"{CROPS_DIR}/step-{number:02d}{suffix}.png"
    context = f"{CROPS_DIR}/step-{number:02d}-context{suffix}.png"
    pictures[crop] = picture.crop(crop_box)
    pictures[context] = picture.crop(context_box)
    return Target(
        point=point,
        crop=crop,
        crop_offset=(local[0] - crop_box[0], local[1] - crop_box[1]),
        context=context,
        context_offset=(local[0] - context_box[0], local[1] - context_box[1]),
        element=element,
    )


def _unique_crop(
    picture: Image.Image, origin: tuple[int, int], point: tuple[int, int], crop_box: tuple[int, int, int, int]
) -> tuple[int, int, int, int]:
    """`crop_box`, or the first larger box that matches only once on the recorded screen (see UNIQUE_CROPS)."""
    screen = np.asarray(picture.convert("L"))
    if not matches_elsewhere(screen, _grey(picture, crop_box), crop_box[:2]):
        return crop_box
    width, height = crop_box[2] - crop_box[0], crop_box[3] - crop_box[1]
    for size in UNIQUE_CROPS:
        if size[0] < width or size[1] < height:
            continue
        larger = _box_around(picture, origin, point, size)
        if not matches_elsewhere(screen, _grey(picture, larger), larger[:2]):
            return larger
    return crop_box


def _grey(picture: Image.Image, box: tuple[int, int, int, int]) -> np.ndarray:
    return np.asarray(picture.crop(box).convert("L"))


def _effect(
    before: tuple[Image.Image, tuple[int, int]] | None,
    after: tuple[Image.Image, tuple[int, int]] | None,
    target: Target | None,
    own: list[tuple[int, int, int, int]],
) -> ExpectedEffect:
    """The region that changed from this step's screenshot to the next (relative to the target),
    leaving out `own` (Holodesk's own tray icon and windows, screen pixels)."""
    if before is None or after is None or before[1] != after[1] or before[0].size != after[0].size:
        return ExpectedEffect(changed=False)
    origin = before[1]
    ignore = [(left - origin[0], top - origin[1], width, height) for left, top, width, height in own]
    box = changed_box(np.asarray(before[0]), np.asarray(after[0]), ignore)
    if box is None:
        return ExpectedEffect(changed=False)
    left, top, width, height = box
    if target is None:
        return ExpectedEffect(True, (left + origin[0], top + origin[1], width, height))
    return ExpectedEffect(True, (left + origin[0] - target.point[0], top + origin[1] - target.point[1], width, height))


def _own_regions(step: Mapping[str, Any]) -> list[tuple[int, int, int, int]]:
    """The step's `own_regions` (the engine records where Holodesk's own things were), as read back."""
    regions = step.get("own_regions")
    if not isinstance(regions, list):
        return []
    return [
        (int(r[0]), int(r[1]), int(r[2]), int(r[3]))
        for r in regions
        if isinstance(r, list) and len(r) == 4 and all(isinstance(v, int) and not isinstance(v, bool) for v in r)
    ]


def _irreversible(action: Action, element: str) -> bool:
    if isinstance(action, KeyCombo):
        return tuple(sorted(action.keys)) in {tuple(sorted(keys)) for keys in IRREVERSIBLE_KEYS}
    return bool(IRREVERSIBLE_WORDS.search(element))


def _parameter_name(element: str, count: int, taken: set[str]) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", element.lower()) if w not in _FILLER_WORDS]
    base = "_".join(words[:2])[:30] if words and words[0][0].isalpha() else ""
    name = base or f"text_{count}"
    suffix = 2
    while name in taken:
        name = f"{base or 'text'}_{suffix}"
        suffix += 1
    return name
