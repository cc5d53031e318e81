"""Holotron's action vocabulary: H Company's desktop tool calls, its web (Surfer-H) actions, and ours.

The prompt teaches the desktop tools (plus wait, answer and our ask_user); the web names, Holo3's
click/write and the tool-call extras are accepted too, because a model trained by H Company may
speak any of them. Coordinates are integers in [0, 1000] of the image shown (NormalizedSpace).
Recognised but unsupported here: goto, restart (a browser's, not a desktop's) and key_down/key_up
(a key held across steps could be left down if the run stops).
"""

from __future__ import annotations

from typing import Any

from automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    KeyCombo,
    MouseButton,
    Move,
    Point,
    Scroll,
    TypeText,
    Wait,
)
from automation.coords import NORMALIZED_MAX
from inference.profiles.extract import Call, MalformedAnswer
from inference.profiles.tools import (
    BUTTON,
    CLICKS,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    SCROLL_AMOUNT,
    SECONDS,
    Args,
    CoordinateRange,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    optional_point,
    point,
)

CONTENT = Param("content", Kind.TEXT, aliases=("text",))
ELEMENT = Param("element", Kind.LABEL, required=False, aliases=("element_description",))


def _click(count: int) -> Any:
    def build(args: Args) -> Action:
        return Click(point(args), button=args.get("button", MouseButton.LEFT), count=args.get("clicks", count))

    return build


def _scroll(tool: str) -> Any:
    def build(args: Args) -> Action:
        extra = {"amount": args["amount"]} if "amount" in args else {}
        return Scroll(args["direction"], at=optional_point(args, tool), **extra)

    return build


def _write(tool: str, *, needs_point: bool) -> Any:
    def build(args: Args) -> Action:
        at = optional_point(args, tool)
        if needs_point and at is None:
            raise MalformedAnswer(f"{tool} needs x and y")
        return TypeText(args["content"], at=at)

    return build


def _hold_and_tap(args: Args) -> Action:
    if args.get("count", 1) != 1:
        raise MalformedAnswer("hold_and_tap_key_desktop can tap the key once per step here")
    tap = args["tap_key"]
    if len(tap) != 1:
        raise MalformedAnswer("hold_and_tap_key_desktop taps one key")
    return KeyCombo((*args["hold_keys"], *tap))


def _wait(args: Args) -> Action:
    return Wait(args["seconds"]) if "seconds" in args else Wait()


_UNSUPPORTED_WEB = (
    "{name} belongs to a web browser agent; Holodesk drives the whole desktop, where it is not"
    " supported (click the browser's address bar and type instead)"
)
_UNSUPPORTED_HOLD = (
    "{name} holds a key across steps, which is not supported (a stopped run could leave it held);"
    " use hotkey_desktop or hold_and_tap_key_desktop"
)

HOLOTRON_TOOLS = ToolSet(
    [
        # -- desktop tool calls (taught in the prompt) --
        Tool("click_desktop", (X, Y, BUTTON, CLICKS), _click(1)),
        Tool("double_click_desktop", (X, Y, BUTTON), _click(2)),
        Tool("move_to_desktop", (X, Y), lambda args: Move(point(args))),
        Tool(
            "drag_to_desktop",
            (
                Param("start_x", Kind.X, aliases=("from_x", "x1")),
                Param("start_y", Kind.Y, aliases=("from_y", "y1")),
                Param("x", Kind.X, aliases=("end_x", "to_x", "x2")),
                Param("y", Kind.Y, aliases=("end_y", "to_y", "y2")),
                BUTTON,
            ),
            lambda args: Drag(
                Point(args["start_x"], args["start_y"]), point(args), button=args.get("button", MouseButton.LEFT)
            ),
        ),
        Tool("scroll_desktop", (DIRECTION, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), _scroll("scroll_desktop")),
        Tool("write_desktop", (CONTENT, OPTIONAL_X, OPTIONAL_Y), _write("write_desktop", needs_point=False)),
        Tool(
            "hotkey_desktop",
            (Param("keys", Kind.KEYS, aliases=("key", "hotkey", "combination")),),
            lambda args: KeyCombo(args["keys"]),
        ),
        Tool(
            "hold_and_tap_key_desktop",
            (
                Param("hold_keys", Kind.KEYS, aliases=("hold_key", "hold", "modifiers", "modifier")),
                Param("tap_key", Kind.KEYS, aliases=("tap", "key")),
                Param("count", Kind.COUNT, required=False, aliases=("times", "taps"), maximum=100),
            ),
            _hold_and_tap,
        ),
        Tool("wait", (SECONDS,), _wait),
        Tool(
            "answer",
            (Param("content", Kind.TEXT, required=False, aliases=("text", "answer")),),
            lambda args: Done(args.get("content", "")),
        ),
        Tool(
            "ask_user",
            (Param("question", Kind.TEXT, aliases=("content", "text")),),
            lambda args: AskUser(args["question"]),
        ),
        # -- accepted, not taught --
        Tool(
            "update_plan",
            (Param("plan", Kind.PLAN, aliases=("content", "steps", "text")),),
            is_plan=True,
            documented=False,
        ),
        Tool("key_down_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_down_desktop")),
        Tool("key_up_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_up_desktop")),
        # Surfer-H web actions, and Holo3's click/write.
        Tool("click_element", (ELEMENT, X, Y), _click(1), aliases=("click",), documented=False),
        Tool(
            "write_element",
            (CONTENT, ELEMENT, OPTIONAL_X, OPTIONAL_Y),
            _write("write_element", needs_point=True),
            documented=False,
        ),
        Tool("write", (CONTENT, ELEMENT, OPTIONAL_X, OPTIONAL_Y), _write("write", needs_point=False), documented=False),
        Tool(
            "scroll", (DIRECTION, ELEMENT, SCROLL_AMOUNT, OPTIONAL_X, OPTIONAL_Y), _scroll("scroll"), documented=False
        ),
        Tool("go_back", build=lambda args: KeyCombo(("alt", "left")), documented=False),
        Tool("refresh", build=lambda args: KeyCombo(("f5",)), documented=False),
        Tool(
            "goto",
            (Param("url", Kind.TEXT),),
            documented=False,
            refusal=_UNSUPPORTED_WEB.format(name="goto"),
        ),
        Tool("restart", documented=False, refusal=_UNSUPPORTED_WEB.format(name="restart")),
    ],
    CoordinateRange(NORMALIZED_MAX),
)


def holotron_call(action: Action) -> Call:
    """An action written in the vocabulary the prompt teaches (for the history of earlier steps)."""
    match action:
        case Click(at=at, button=button, count=count):
            name = "double_click_desktop" if count == 2 else "click_desktop"
            args: dict[str, Any] = {"x": at.x, "y": at.y}
            if button is not MouseButton.LEFT:
                args["button"] = button.value
            if count == 3:
                args["clicks"] = 3
            return Call(name, (), args)
        case Move(to=to):
            return Call("move_to_desktop", (), {"x": to.x, "y": to.y})
        case Drag(start=start, end=end, button=button):
            args = {"start_x": start.x, "start_y": start.y, "x": end.x, "y": end.y}
            if button is not MouseButton.LEFT:
                args["button"] = button.value
            return Call("drag_to_desktop", (), args)
        case Scroll(direction=direction, amount=amount, at=at):
            args = {"direction": direction.value, "amount": amount}
            if at is not None:
                args.update(x=at.x, y=at.y)
            return Call("scroll_desktop", (), args)
        case TypeText(text=text, at=at):
            args = {"content": text}
            if at is not None:
                args.update(x=at.x, y=at.y)
            return Call("write_desktop", (), args)
        case KeyCombo(keys=keys):
            return Call("hotkey_desktop", (), {"keys": "+".join(keys)})
        case Wait(seconds=seconds):
            return Call("wait", (), {"seconds": seconds})
        case Done(answer=answer):
            return Call("answer", (), {"content": answer})
        case AskUser(question=question):
            return Call("ask_user", (), {"question": question})
    raise ValueError(f"no Holotron action for {action!r}")
