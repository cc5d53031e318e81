"""A Policy made of a profile (prompt, parser, coordinates) and a backend (runs the model)."""

from __future__ import annotations

from collections.abc import Sequence

from holodesk.automation.actions import Move
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.generation import TextGenerator
from holodesk.inference.policy import PastStep, Proposal
from holodesk.inference.profiles.base import PreparedImage, Profile


class ModelPolicy:
    """Proposes steps by asking `backend` with `profile`'s prompt and parsing with its parser."""

    def __init__(self, profile: Profile, backend: TextGenerator) -> None:
        self.profile = profile
        self.backend = backend
        # The engine passes the same frames again on later steps (the last K screenshots); each is
        # prepared once. Keyed by identity, with the frame kept so the id cannot be reused.
        self._prepared: dict[int, tuple[ScreenFrame, PreparedImage]] = {}

    def _prepare(self, frames: Sequence[ScreenFrame]) -> list[PreparedImage]:
        prepared: dict[int, tuple[ScreenFrame, PreparedImage]] = {}
        for frame in frames:
            known = self._prepared.get(id(frame))
            prepared[id(frame)] = known if known is not None else (frame, self.profile.prepare_image(frame))
        self._prepared = prepared  # frames that left the window are forgotten
        return [image for _, image in prepared.values()]

    def propose(self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame]) -> Proposal:
        if not frames:
            raise ValueError("propose needs at least the current screenshot")
        recent = list(frames)[-self.profile.budget.keep_screenshots :]
        images = self._prepare(recent)
        request = self.profile.navigation_request(task, history, images)
        generation = self.backend.generate(request)
        try:
            step = self.profile.parse_navigation(generation.text)
        except ParseError as exc:
            exc.timings = generation.timings
            raise
        current = images[-1]
        return Proposal(
            action=step.action,
            raw_text=generation.text,
            image_width=current.mapping.image_width,
            image_height=current.mapping.image_height,
            note=step.note,
            thought=step.thought,
            timings=generation.timings,
            space=self.profile.space,
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
