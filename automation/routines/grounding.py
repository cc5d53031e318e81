"""The model as the ladder's last rung: `locate` (the path `holodesk locate` uses), mapped to the screen.

Any object with `locate(frame, instruction) -> Proposal` serves (ModelPolicy does, whatever its
backend); the proposal's point is in the profile's model space and is mapped through the one
coordinate owner, `automation.coords`.
"""

from __future__ import annotations

from typing import Protocol

from holodesk.automation.actions import Point
from holodesk.automation.coords import FrameMapping
from holodesk.automation.proposal import Proposal
from holodesk.automation.screen import ScreenFrame


class LocatesElements(Protocol):
    def locate(self, frame: ScreenFrame, instruction: str) -> Proposal: ...


class ModelGrounder:
    """A `locators.Grounder` over the policy's `locate`; counts its calls."""

    def __init__(self, policy: LocatesElements) -> None:
        self.policy = policy
        self.calls = 0

    def locate(self, frame: ScreenFrame, description: str) -> Point:
        self.calls += 1
        proposal = self.policy.locate(frame, description)
        points = proposal.action.points()
        if len(points) != 1:
            raise ValueError(f"the model answered {proposal.action.describe()!r}, not one point")
        mapping = FrameMapping(frame.region, proposal.image_width, proposal.image_height)
        return mapping.model_to_screen(points[0], proposal.space)
