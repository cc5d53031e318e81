"""A Policy made of a profile (prompt, parser, coordinates) and a backend (runs the model).

An answer the profile cannot parse is sent back once, with the parser's error, as the profile's
`retry_request` writes it; nothing is ever proposed from an unusable answer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import fields

from holodesk.automation.actions import Move, Point
from holodesk.automation.cancel import CancelToken
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.generation import TextGenerator
from holodesk.inference.policy import PastStep, Proposal, RejectedAnswer, StepTimings
from holodesk.inference.profiles.base import PreparedImage, Profile


class ModelPolicy:
    """Proposes steps by asking `backend` with `profile`'s prompt and parsing with its parser."""

    def __init__(self, profile: Profile, backend: TextGenerator) -> None:
        self.profile = profile
        self.backend = backend
        # The engine passes the same frames again on later steps (the last K screenshots); each is
        # prepared once. Keyed by identity, with the frame kept so the id cannot be reused.
        self._prepared: dict[int, tuple[ScreenFrame, PreparedImage]] = {}
        self._ahead: tuple[ScreenFrame, PreparedImage] | None = None  # from prepare_ahead (another thread)
        self._ahead_lock = threading.Lock()

    def prepare_ahead(self, frame: ScreenFrame) -> None:
        """Prepare `frame` now, on any thread, for a coming propose() that shows it (the engine calls
        this while the screen settles). Only the newest such frame is kept."""
        image = self.profile.prepare_image(frame)
        with self._ahead_lock:
            self._ahead = (frame, image)

    def _prepare(self, frames: Sequence[ScreenFrame]) -> list[PreparedImage]:
        with self._ahead_lock:
            ahead, self._ahead = self._ahead, None
        known_images = dict(self._prepared)
        if ahead is not None:
            known_images[id(ahead[0])] = ahead
        prepared: dict[int, tuple[ScreenFrame, PreparedImage]] = {}
        for frame in frames:
            known = known_images.get(id(frame))
            if known is not None and known[0] is frame:
                prepared[id(frame)] = known
            else:
                prepared[id(frame)] = (frame, self.profile.prepare_image(frame))
        self._prepared = prepared  # frames that left the window are forgotten
        return [image for _, image in prepared.values()]

    def propose(
        self,
        task: str,
        history: Sequence[PastStep],
        frames: Sequence[ScreenFrame],
        cancel: CancelToken | None = None,
    ) -> Proposal:
        """One step. An unusable answer is sent back to the model with the parser's error, once;
        a second unusable answer is a ParseError (nothing is ever proposed from a bad answer).

        `cancel` (the engine's token) is not waited on: nothing here asks the user, and the engine
        abandons an answer in flight through `interrupt`. Optional, so a benchmark or a check can
        ask for one step without a run."""
        if not frames:
            raise ValueError("propose needs at least the current screenshot")
        recent = list(frames)[-self.profile.budget.keep_screenshots :]
        images = self._prepare(recent)
        request = self.profile.navigation_request(task, history, images)
        pointer = pointer_after(history)
        generation = self.backend.generate(request)
        rejected: list[RejectedAnswer] = []
        timings = generation.timings
        try:
            step = self.profile.parse_navigation(generation.text, pointer)
        except ParseError as first:
            rejected.append(RejectedAnswer(generation.text, str(first)))
            generation = self.backend.generate(self.profile.retry_request(request, generation.text, str(first)))
            timings = _sum_timings(timings, generation.timings)
            try:
                step = self.profile.parse_navigation(generation.text, pointer)
            except ParseError as second:
                second.timings = timings
                second.args = (f"{second} (and before that: {first})",)
                raise
        current = images[-1]
        return Proposal(
            action=step.action,
            raw_text=generation.text,
            image_width=current.mapping.image_width,
            image_height=current.mapping.image_height,
            note=step.note,
            thought=step.thought,
            timings=timings,
            space=self.profile.space,
            element=step.element,
            rejected=tuple(rejected),
        )

    def interrupt(self) -> None:
        """Ask the backend to abandon the answer it is computing, where it can (the local one can)."""
        interrupt = getattr(self.backend, "interrupt", None)
        if callable(interrupt):
            interrupt()

    def locate(self, frame: ScreenFrame, instruction: str) -> Proposal:
        """Ask where one described element is: a `Move` to it, in model space."""
        image = self.profile.prepare_image(frame)
        generation = self.backend.generate(self.profile.localization_request(instruction, image))
        try:
            point = self.profile.parse_localization(generation.text)
        except ParseError as exc:
            exc.timings = generation.timings
            raise
        return Proposal(
            action=Move(point),
            raw_text=generation.text,
            image_width=image.mapping.image_width,
            image_height=image.mapping.image_height,
            timings=generation.timings,
            space=self.profile.space,
        )


def pointer_after(history: Sequence[PastStep]) -> Point | None:
    """Where the earlier steps left the pointer (model space): the last point of the last performed
    action that had one; None when no step put it anywhere. (The user may have moved it since: a
    drag built from it shows its start on the approval overlay before anything runs.)"""
    for step in reversed(history):
        if not step.performed:
            continue
        points = step.action.points()
        if points:
            return points[-1]
    return None


def _sum_timings(first: StepTimings, second: StepTimings) -> StepTimings:
    """Two model calls of one step, added up field by field."""
    return StepTimings(**{f.name: getattr(first, f.name) + getattr(second, f.name) for f in fields(StepTimings)})
