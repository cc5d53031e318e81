"""Action vocabularies: named tools with typed parameters that turn a `Call` into one `Action`.

A profile declares its vocabulary as a `ToolSet`; the same declaration binds and checks arguments
(unknown, missing, repeated, wrongly typed or out-of-range values are refused, never guessed),
lists what the prompt documents, and generates the JSON schema for structured output. The builders
and the tools several vocabularies share (wait, answer, ask_user) live here too, with `KeywordNames`,
which writes an action back as a call in a keyword vocabulary (for the history of earlier steps).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from holodesk.automation.actions import (
    MAX_PLAN_GOALS,
    MAX_SCROLL_AMOUNT,
    MAX_WAIT_SECONDS,
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    GoalStatus,
    KeyCombo,
    MouseButton,
    Move,
    PlanGoal,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    Wait,
)
from holodesk.automation.keys import normalize_key, parse_combination
from holodesk.inference.profiles.parsing import Call, MalformedAnswer, strict_int, strict_seconds

# == tools, parameters and tool sets ================================================================


class Kind(StrEnum):
    """What a parameter holds, which decides how it is checked and how the schema describes it."""

    X = "x"
    Y = "y"
    TEXT = "text"  # text the action uses (typed text, answer, question)
    LABEL = "label"  # a description the model adds (element name): must be text, not used
    DIRECTION = "direction"
    COUNT = "count"  # a small positive integer; Param.maximum bounds it
    SECONDS = "seconds"
    KEYS = "keys"  # "ctrl+c" or ["ctrl", "c"]
    BUTTON = "button"
    PLAN = "plan"  # text or a list of texts
    KEY_LIST = "key_list"  # ["ctrl", "c"] (H Company's tools); "ctrl+c" is forgiven
    FLAG = "flag"  # true or false
    GOALS = "goals"  # [{"title": ..., "status": ...}] (update_plan)


# A description of the target longer than this is no description.
MAX_LABEL_CHARS = 2_000

# Bounds on free values in the structured-output schemas only (the parser still reads longer values
# from servers that do not constrain). A grammar-constrained decoder can end a string only with its
# closing quote and a number only where its grammar allows: unbounded, a rambling model (or random
# weights) writes until max_tokens and the answer never parses. Bounded, the longest answer a schema
# allows fits the profile's token budget (inference/profiles/schema_bounds.py measures it).
SCHEMA_NOTE_CHARS = 120  # what the model notes for later steps
SCHEMA_THOUGHT_CHARS = 240  # its reasoning about this step
SCHEMA_TEXT_CHARS = 240  # typed text, answers, questions: longer text takes more than one step
SCHEMA_LABEL_CHARS = 80  # the target's description
SCHEMA_KEYS_CHARS = 24  # one key name, or a combination such as "ctrl+shift+escape"
SCHEMA_GOAL_TITLE_CHARS = 60
SCHEMA_PLAN_GOALS = 4
_TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: Kind
    required: bool = True
    aliases: tuple[str, ...] = ()
    maximum: int | None = None  # for Kind.COUNT and Kind.KEY_LIST
    minimum: int = 1  # for Kind.COUNT
    # Whether the structured-output schema (and so the prompt's format) includes it: older spellings
    # are read but not taught. `demanded`: the schema requires it though the parser forgives its absence.
    taught: bool = True
    demanded: bool = False


@dataclass(frozen=True, slots=True)
class CoordinateRange:
    """Model coordinates accepted by a parser: integers in [0, maximum]."""

    maximum: int

    def check(self, value: object, what: str) -> int:
        number = strict_int(value, what)
        if not 0 <= number <= self.maximum:
            raise MalformedAnswer(f"{what}={number} is outside [0, {self.maximum}]")
        return number


Args = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Tool:
    """One name the model may use.

    `build` gets the checked arguments under their canonical names (absent optional ones missing).
    A tool with `refusal` is recognised but not supported here: naming it is a clear error.
    A tool with `is_plan` carries a plan (a note), not an action.
    """

    name: str
    params: tuple[Param, ...] = ()
    build: Callable[[Args], Action] | None = None
    aliases: tuple[str, ...] = ()
    documented: bool = True
    refusal: str | None = None
    is_plan: bool = False
    description: str = ""  # for the schema (and so the prompt's output format)
    # The order positional arguments bind in (`click_desktop(500, 300)`), when not `params`' order.
    positional: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Interpreted:
    """What one call means: an action, or (for a plan tool) a plan with no action.

    `element` is the model's description of the target (`element`, or a drag's `description`).
    """

    action: Action | None
    plan: str = ""
    element: str = ""


class ToolSet:
    """A vocabulary: tools by name and alias, with one coordinate range for all of them."""

    def __init__(self, tools: Iterable[Tool], coordinates: CoordinateRange) -> None:
        self.tools = tuple(tools)
        self.coordinates = coordinates
        self._by_name: dict[str, Tool] = {}
        for tool in self.tools:
            for name in (tool.name, *tool.aliases):
                if name in self._by_name:
                    raise ValueError(f"tool name {name!r} is declared twice")
                self._by_name[name] = tool

    @property
    def names(self) -> frozenset[str]:
        """Every name and alias this vocabulary recognises (supported or not)."""
        return frozenset(self._by_name)

    @property
    def documented(self) -> tuple[Tool, ...]:
        return tuple(tool for tool in self.tools if tool.documented)

    def lookup(self, name: object) -> Tool:
        if not isinstance(name, str):
            raise MalformedAnswer(f"the action name must be text, got {name!r}")
        # Only spaces are forgiven around a name: a control character is not part of any name.
        if not _TOOL_NAME.fullmatch(name.strip(" ")):
            raise MalformedAnswer(f"the action name {name[:60]!r} is not a plain name")
        tool = self._by_name.get(name.strip(" "))
        if tool is None:
            known = ", ".join(tool.name for tool in self.documented)
            raise MalformedAnswer(f"unknown action {name.strip()[:60]!r} (known: {known})")
        return tool

    def interpret(self, call: Call, context: Mapping[str, Any] | None = None) -> Interpreted:
        """The call's meaning; ActionError from the action constructors passes through.

        `context` is what earlier steps established (`POINTER`: where the pointer was left, in
        model space); builders that need it find it among their arguments.
        """
        tool = self.lookup(call.name)
        if tool.refusal is not None:
            raise MalformedAnswer(tool.refusal)
        args = self._bind(tool, call)
        element = " ".join(str(args.get("element") or args.get("description") or "").split())
        if tool.is_plan:
            return Interpreted(action=None, plan=str(args.get("plan", "")))
        assert tool.build is not None, f"tool {tool.name} has nothing to build"
        return Interpreted(action=tool.build({**(context or {}), **args}), element=element)

    def _bind(self, tool: Tool, call: Call) -> dict[str, Any]:
        by_name = {param.name: param for param in tool.params}
        positional = [by_name[name] for name in tool.positional] if tool.positional is not None else tool.params
        if len(call.positional) > len(positional):
            raise MalformedAnswer(f"{tool.name} takes at most {len(positional)} arguments, got {len(call.positional)}")
        raw: dict[str, Any] = {}
        for bound, value in zip(positional, call.positional, strict=False):
            raw[bound.name] = value
        by_alias = {alias: param for param in tool.params for alias in (param.name, *param.aliases)}
        for key, value in call.keywords.items():
            param = by_alias.get(key)
            if param is None:
                takes = ", ".join(p.name for p in tool.params) or "no arguments"
                raise MalformedAnswer(f"{tool.name} has no argument {str(key)[:40]!r} (it takes {takes})")
            if param.name in raw:
                raise MalformedAnswer(f"{tool.name} got {param.name!r} twice")
            raw[param.name] = value
        checked: dict[str, Any] = {}
        for param in tool.params:
            value = raw.get(param.name)
            if value is None:  # JSON null means "not given"
                if param.required:
                    raise MalformedAnswer(f"{tool.name} needs {param.name!r}")
                continue
            checked[param.name] = self._check(tool, param, value)
        return checked

    def _check(self, tool: Tool, param: Param, value: Any) -> Any:
        what = f"{tool.name} {param.name}"
        kind = param.kind
        if kind in (Kind.X, Kind.Y):
            return self.coordinates.check(value, what)
        if kind in (Kind.TEXT, Kind.LABEL, Kind.DIRECTION, Kind.BUTTON):
            if not isinstance(value, str):
                raise MalformedAnswer(f"{what} must be text, got {type(value).__name__}")
            if kind is Kind.LABEL and len(value) > MAX_LABEL_CHARS:
                raise MalformedAnswer(f"{what} is {len(value)} characters long (at most {MAX_LABEL_CHARS})")
            return value
        if kind is Kind.COUNT:
            number = strict_int(value, what)
            if not param.minimum <= number <= (param.maximum or 1):
                raise MalformedAnswer(f"{what}={number} is outside [{param.minimum}, {param.maximum}]")
            return number
        if kind is Kind.FLAG:
            if not isinstance(value, bool):
                raise MalformedAnswer(f"{what} must be true or false, got {_short_repr(value)}")
            return value
        if kind is Kind.KEY_LIST:
            keys = keys_from(value, what)
            if param.maximum is not None and len(keys) > param.maximum:
                raise MalformedAnswer(f"{what} has {len(keys)} keys (at most {param.maximum})")
            return keys
        if kind is Kind.GOALS:
            return goals_from(value, what)
        if kind is Kind.SECONDS:
            return strict_seconds(value, what)
        if kind is Kind.KEYS:
            return keys_from(value, what)
        if kind is Kind.PLAN:
            if isinstance(value, str):
                return value
            if isinstance(value, list) and all(isinstance(item, str) for item in value):
                return "\n".join(value)
            raise MalformedAnswer(f"{what} must be text or a list of texts")
        raise AssertionError(f"unhandled parameter kind {kind}")

    # -- JSON schema (structured output) ---------------------------------------------------------

    def variant_schemas(
        self,
        name_key: str,
        extra: Mapping[str, Any] | None = None,
        image_size: tuple[int, int] | None = None,
    ) -> list[dict[str, Any]]:
        """One object schema per documented tool, tagged by `name_key`; `extra` adds shared fields.

        With `image_size` (pixel vocabularies), x and y are bounded by that image's width and height.
        """
        variants = []
        for tool in self.documented:
            properties: dict[str, Any] = {name_key: {"type": "string", "enum": [tool.name]}}
            required = [name_key]
            if extra:
                properties.update(extra)
                required.extend(extra)
            for param in tool.params:
                if not param.taught:
                    continue
                properties[param.name] = self._param_schema(param, image_size)
                if param.required or param.demanded:
                    required.append(param.name)
            variant: dict[str, Any] = {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            }
            if tool.description:
                variant["description"] = tool.description
            variants.append(variant)
        return variants

    def _param_schema(self, param: Param, image_size: tuple[int, int] | None) -> dict[str, Any]:
        kind = param.kind
        if kind in (Kind.X, Kind.Y):
            maximum = self.coordinates.maximum
            if image_size is not None:
                maximum = min(maximum, (image_size[0] if kind is Kind.X else image_size[1]) - 1)
            return {"type": "integer", "minimum": 0, "maximum": maximum}
        if kind is Kind.DIRECTION:
            return {"type": "string", "enum": [direction.value for direction in ScrollDirection]}
        if kind is Kind.BUTTON:
            return {"type": "string", "enum": [button.value for button in MouseButton]}
        if kind is Kind.COUNT:
            return {"type": "integer", "minimum": param.minimum, "maximum": param.maximum or 1}
        if kind is Kind.FLAG:
            return {"type": "boolean"}
        if kind is Kind.KEY_LIST:
            key = {"type": "string", "maxLength": SCHEMA_KEYS_CHARS}
            return {"type": "array", "items": key, "minItems": 1, "maxItems": param.maximum or 1}
        if kind is Kind.GOALS:
            goal = {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "maxLength": SCHEMA_GOAL_TITLE_CHARS},
                    "status": {"type": "string", "enum": [status.value for status in GoalStatus]},
                },
                "required": ["title", "status"],
                "additionalProperties": False,
            }
            return {"type": "array", "items": goal, "minItems": 1, "maxItems": min(SCHEMA_PLAN_GOALS, MAX_PLAN_GOALS)}
        if kind is Kind.SECONDS:
            # Tenths of a second: without multipleOf, a number's fraction has no length bound.
            return {"type": "number", "minimum": 0.1, "maximum": MAX_WAIT_SECONDS, "multipleOf": 0.1}
        if kind is Kind.LABEL:
            return {"type": "string", "maxLength": SCHEMA_LABEL_CHARS}
        if kind is Kind.KEYS:
            return {"type": "string", "maxLength": SCHEMA_KEYS_CHARS}
        return {"type": "string", "maxLength": SCHEMA_TEXT_CHARS}


def keys_from(value: object, what: str) -> tuple[str, ...]:
    """Key names from "ctrl+c", "ctrl c" or ["ctrl", "c"] (a list item may itself be "ctrl+c")."""
    if isinstance(value, str):
        return parse_combination(value)
    if isinstance(value, list | tuple) and value and all(isinstance(item, str) for item in value):
        keys: list[str] = []
        for item in value:
            keys.extend(parse_combination(item) if len(item.strip()) > 1 else (normalize_key(item),))
        return tuple(keys)
    raise MalformedAnswer(f'{what} must be a key combination like "ctrl+c" or a list of key names')


_GOAL_STATUSES = {status.value: status for status in GoalStatus}


def goals_from(value: object, what: str) -> tuple[PlanGoal, ...]:
    """Plan goals from [{"title": ..., "status": ...}] (status "todo" when left out)."""
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_PLAN_GOALS:
        raise MalformedAnswer(f"{what} must be a list of 1 to {MAX_PLAN_GOALS} goals")
    goals = []
    for item in value:
        if not isinstance(item, dict) or "title" not in item or set(item) - {"title", "status"}:
            raise MalformedAnswer(f'{what}: each goal must be {{"title": ..., "status": ...}}')
        title, status = item["title"], item.get("status") or "todo"
        if not isinstance(title, str) or not isinstance(status, str) or status not in _GOAL_STATUSES:
            known = ", ".join(_GOAL_STATUSES)
            raise MalformedAnswer(f"{what}: a goal's title must be text and its status one of {known}")
        goals.append(PlanGoal(title, _GOAL_STATUSES[status]))  # ActionError for an empty title
    return tuple(goals)


def _short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Where earlier steps left the pointer (a model-space Point), for tools that start from it.
POINTER = "_pointer"


def point(args: Args, x: str = "x", y: str = "y") -> Point:
    return Point(args[x], args[y])


def optional_point(args: Args, tool: str, x: str = "x", y: str = "y") -> Point | None:
    """The point (x, y) when both are given, None when neither is; one without the other is an error."""
    has_x, has_y = x in args, y in args
    if has_x != has_y:
        raise MalformedAnswer(f"{tool} gives {x if has_x else y} without {y if has_x else x}")
    return Point(args[x], args[y]) if has_x else None


# Parameter sets several vocabularies share.
X = Param("x", Kind.X)
Y = Param("y", Kind.Y)
OPTIONAL_X = Param("x", Kind.X, required=False)
OPTIONAL_Y = Param("y", Kind.Y, required=False)
BUTTON = Param("button", Kind.BUTTON, required=False)
CLICKS = Param("clicks", Kind.COUNT, required=False, aliases=("count",), maximum=3)
SCROLL_AMOUNT = Param("amount", Kind.COUNT, required=False, maximum=MAX_SCROLL_AMOUNT)
DIRECTION = Param("direction", Kind.DIRECTION)
SECONDS = Param("seconds", Kind.SECONDS, required=False, aliases=("duration", "time"))


# == action builders several vocabularies share =====================================================

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


def scroll_builder(tool: str, amount: str = "amount", default: int | None = None) -> Builder:
    """A scroll, at (x, y) when both are given; `tool` names the tool in errors.

    The number of wheel clicks is the argument `amount`, else `default`, else Scroll's own default.
    """

    def build(args: Args) -> Action:
        clicks = args.get(amount, default)
        extra = {"amount": clicks} if clicks is not None else {}
        return Scroll(args["direction"], at=optional_point(args, tool), **extra)

    return build


def write_builder(tool: str, *, text: str = "content", needs_point: bool = False) -> Builder:
    """Typing the argument `text`, at (x, y) when both are given (or must be, with `needs_point`)."""

    def build(args: Args) -> Action:
        at = optional_point(args, tool)
        if needs_point and at is None:
            raise MalformedAnswer(f"{tool} needs x and y")
        return TypeText(
            args[text], at=at, press_enter=args.get("press_enter", False), overwrite=args.get("overwrite", False)
        )

    return build


def build_wait(args: Args) -> Action:
    """A wait of `seconds`, or Wait's own default when the model gave none."""
    return Wait(args["seconds"]) if "seconds" in args else Wait()


# == what the keyword vocabularies (Holo1.5's and Holotron's) share =================================

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
