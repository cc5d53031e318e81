"""Action builders that several vocabularies share: checked tool arguments -> one `Action`.

A `Tool.build` gets its arguments already checked and under canonical names; the builders here
hold the defaults (left button, one click, no point) in one place, and take what differs between
vocabularies (argument keys, the tool name for error messages) as parameters.
"""

from __future__ import annotations

from collections.abc import Callable

from holodesk.automation.actions import Action, Click, Drag, MouseButton, Scroll, TypeText, Wait
from holodesk.inference.profiles.extract import MalformedAnswer
from holodesk.inference.profiles.tools import Args, optional_point, point

Builder = Callable[[Args], Action]


def click_builder(count: int) -> Builder:
    """A click at (x, y); `count` is the tool's own number of clicks, which `clicks` may override."""

    def build(args: Args) -> Action:
        return Click(point(args), button=args.get("button", MouseButton.LEFT), count=args.get("clicks", count))

    return build


def drag_builder(start: tuple[str, str], end: tuple[str, str]) -> Builder:
    """A drag between the points under the argument keys `start` and `end`, left button unless given."""

    def build(args: Args) -> Action:
        return Drag(point(args, *start), point(args, *end), button=args.get("button", MouseButton.LEFT))

    return build


def scroll_builder(tool: str) -> Builder:
    """A scroll, at (x, y) when both are given; `tool` names the tool in errors."""

    def build(args: Args) -> Action:
        # Scroll has its own default amount; pass one only when the model gave it.
        extra = {"amount": args["amount"]} if "amount" in args else {}
        return Scroll(args["direction"], at=optional_point(args, tool), **extra)

    return build


def write_builder(tool: str, *, text: str = "content", needs_point: bool = False) -> Builder:
    """Typing the argument `text`, at (x, y) when both are given (or must be, with `needs_point`)."""

    def build(args: Args) -> Action:
        at = optional_point(args, tool)
        if needs_point and at is None:
            raise MalformedAnswer(f"{tool} needs x and y")
        return TypeText(args[text], at=at)

    return build


def build_wait(args: Args) -> Action:
    """A wait of `seconds`, or Wait's own default when the model gave none."""
    return Wait(args["seconds"]) if "seconds" in args else Wait()
