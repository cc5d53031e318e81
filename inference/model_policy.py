"""A Policy made of a profile (prompt, parser, coordinates) and a backend (runs the model)."""

from __future__ import annotations

from collections.abc import Sequence

from automation.actions import Move
from automation.screen import ScreenFrame
from inference.errors import ParseError
from inference.generation import TextGenerator
from inference.policy import PastStep, Proposal
from inference.profiles.base import Profile


class ModelPolicy:
    """Proposes steps by asking `backend` with `profile`'s prompt and parsing with its parser."""

    def __init__(self, profile: Profile, backend: TextGenerator) -> None:
        self.profile = profile
        self.backend = backend

    def propose(self, task: str, history: Sequence[PastStep], frames: Sequence[ScreenFrame]) -> Proposal:
        if not frames:
            raise ValueError("propose needs at least the current screenshot")
        recent = list(frames)[-self.profile.budget.keep_screenshots :]
        images = [self.profile.prepare_image(frame) for frame in recent]
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
