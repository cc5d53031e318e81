"""The `locate` tool: where the configured model sees a described element on the current screen. Read-only.

The screen is grabbed as `screenshot` grabs it (Holodesk's own windows hidden) and shown to the model
with the profile's localization prompt; the answer comes back in that screenshot's pixels, the space
`act` takes. Nothing is shown to the person and nothing is done. The model's own text never goes back
to the client: an answer that is not one point on the screenshot is refused in words (its text escaped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.mcp.act_arguments import BadToolInput
from holodesk.app.mcp.tools import MAX_DESCRIPTION_CHARS
from holodesk.automation.coords import FrameMapping, Rect
from holodesk.automation.display_text import safe_text
from holodesk.automation.errors import AutomationError, OffScreenError
from holodesk.automation.proposal import UnusableProposal
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy


class NotLocated(HolodeskAppError):
    """The model could not say where the element is; the message says why, meant for the agent."""


@dataclass(frozen=True, slots=True)
class Located:
    """The element's point in the screenshot's pixels (top-left 0,0), and the screenshot's size."""

    x: int
    y: int
    width: int
    height: int


def read_description(arguments: Mapping[str, object]) -> str:
    """The `description` argument, or BadToolInput in words."""
    unknown = sorted(set(arguments) - {"description"})
    if unknown:
        raise BadToolInput(f"locate does not take {', '.join(unknown)} (it takes description)")
    description = arguments.get("description")
    if not isinstance(description, str) or not description.strip():
        raise BadToolInput("description (the element, in words) is needed")
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise BadToolInput(f"the description is {len(description)} characters (at most {MAX_DESCRIPTION_CHARS})")
    return description


def locate_on(frame: ScreenFrame, policy: ModelPolicy, description: str) -> Located:
    """Ask `policy` where `description` is on `frame`; NotLocated in words when it cannot say."""
    try:
        proposal = policy.locate(frame, description)
        (model_point,) = proposal.action.points()
        # The screenshot's own pixel space: the monitor's top-left corner is 0,0, as for `act`.
        screenshot = Rect(0, 0, frame.width, frame.height)
        mapping = FrameMapping(screenshot, proposal.image_width, proposal.image_height)
        point = mapping.model_to_screen(model_point, proposal.space)
    except UnusableProposal as exc:  # before InferenceError: a ParseError is both
        raise NotLocated(f"the model's answer could not be used: {safe_text(str(exc))}") from None
    except OffScreenError as exc:
        raise NotLocated(f"the model's point is not on the screenshot: {safe_text(str(exc))}") from None
    except (InferenceError, AutomationError) as exc:
        raise NotLocated(f"the model could not be asked: {safe_text(str(exc))}") from None
    return Located(point.x, point.y, frame.width, frame.height)
