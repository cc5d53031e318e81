"""What the keyword-argument vocabularies (Holo1.5's and Holotron's) share.

Both name every argument (`x`, `y`, `content`, ...) and declare wait, answer and ask_user alike;
they differ only in the other tools' names and in the keys of a drag's end point. So the common
tools are declared once here, and one writer turns an action back into a call in either
vocabulary (for the history of earlier steps), given that vocabulary's `KeywordNames`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    KeyCombo,
    MouseButton,
    Move,
    Scroll,
    TypeText,
    Wait,
)
from holodesk.inference.profiles.builders import build_wait
from holodesk.inference.profiles.extract import Call
from holodesk.inference.profiles.tools import SECONDS, Kind, Param, Tool

WAIT = Tool("wait", (SECONDS,), build_wait)
ANSWER = Tool(
    "answer",
    (Param("content", Kind.TEXT, required=False, aliases=("text", "answer")),),
    lambda args: Done(args.get("content", "")),
)
ASK_USER = Tool(
    "ask_user",
    (Param("question", Kind.TEXT, aliases=("content", "text")),),
    lambda args: AskUser(args["question"]),
)


@dataclass(frozen=True, slots=True)
class KeywordNames:
    """The names one keyword vocabulary gives the actions it writes (wait, answer, ask_user are shared)."""

    vocabulary: str  # for the error when an action has no name here
    click: str
    double_click: str
    move: str
    drag: str
    drag_end: tuple[str, str]  # the keys of the drag's end point; its start is start_x, start_y
    scroll: str
    write: str
    keys: str

    def call(self, action: Action) -> Call:
        """`action` as a keyword call in this vocabulary; ValueError for an action it has no name for."""
        match action:
            case Click(at=at, button=button, count=count):
                args: dict[str, Any] = {"x": at.x, "y": at.y}
                if button is not MouseButton.LEFT:
                    args["button"] = button.value
                # A double click has its own tool; a triple click is a click with clicks=3.
                if count == 3:
                    args["clicks"] = 3
                return Call(self.double_click if count == 2 else self.click, (), args)
            case Move(to=to):
                return Call(self.move, (), {"x": to.x, "y": to.y})
            case Drag(start=start, end=end, button=button):
                end_x, end_y = self.drag_end
                args = {"start_x": start.x, "start_y": start.y, end_x: end.x, end_y: end.y}
                if button is not MouseButton.LEFT:
                    args["button"] = button.value
                return Call(self.drag, (), args)
            case Scroll(direction=direction, amount=amount, at=at):
                args = {"direction": direction.value, "amount": amount}
                if at is not None:
                    args.update(x=at.x, y=at.y)
                return Call(self.scroll, (), args)
            case TypeText(text=text, at=at):
                args = {"content": text}
                if at is not None:
                    args.update(x=at.x, y=at.y)
                return Call(self.write, (), args)
            case KeyCombo(keys=keys):
                return Call(self.keys, (), {"keys": "+".join(keys)})
            case Wait(seconds=seconds):
                return Call(WAIT.name, (), {"seconds": seconds})
            case Done(answer=answer):
                return Call(ANSWER.name, (), {"content": answer})
            case AskUser(question=question):
                return Call(ASK_USER.name, (), {"question": question})
        raise ValueError(f"no {self.vocabulary} action for {action!r}")
