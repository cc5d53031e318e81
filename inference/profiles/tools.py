"""Action vocabularies: named tools with typed parameters that turn a `Call` into one `Action`.

A profile declares its vocabulary as a `ToolSet`; the same declaration binds and checks arguments
(unknown, missing, repeated, wrongly typed or out-of-range values are refused, never guessed),
lists what the prompt documents, and generates the JSON schema for structured output.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from holodesk.automation.actions import (
    MAX_SCROLL_AMOUNT,
    MAX_WAIT_SECONDS,
    Action,
    MouseButton,
    Point,
    ScrollDirection,
)
from holodesk.automation.keys import normalize_key, parse_combination
from holodesk.inference.profiles.extract import Call, MalformedAnswer, strict_int, strict_seconds


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


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    kind: Kind
    required: bool = True
    aliases: tuple[str, ...] = ()
    maximum: int | None = None  # for Kind.COUNT


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


@dataclass(frozen=True, slots=True)
class Interpreted:
    """What one call means: an action, or (for a plan tool) a plan with no action."""

    action: Action | None
    plan: str = ""


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
        tool = self._by_name.get(name.strip())
        if tool is None:
            known = ", ".join(tool.name for tool in self.documented)
            raise MalformedAnswer(f"unknown action {name.strip()[:60]!r} (known: {known})")
        return tool

    def interpret(self, call: Call) -> Interpreted:
        """The call's meaning; ActionError from the action constructors passes through."""
        tool = self.lookup(call.name)
        if tool.refusal is not None:
            raise MalformedAnswer(tool.refusal)
        args = self._bind(tool, call)
        if tool.is_plan:
            return Interpreted(action=None, plan=str(args.get("plan", "")))
        assert tool.build is not None, f"tool {tool.name} has nothing to build"
        return Interpreted(action=tool.build(args))

    def _bind(self, tool: Tool, call: Call) -> dict[str, Any]:
        if len(call.positional) > len(tool.params):
            raise MalformedAnswer(f"{tool.name} takes at most {len(tool.params)} arguments, got {len(call.positional)}")
        raw: dict[str, Any] = {}
        for param, value in zip(tool.params, call.positional, strict=False):
            raw[param.name] = value
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
            return value
        if kind is Kind.COUNT:
            number = strict_int(value, what)
            if not 1 <= number <= (param.maximum or 1):
                raise MalformedAnswer(f"{what}={number} is outside [1, {param.maximum}]")
            return number
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
                properties[param.name] = self._param_schema(param, image_size)
                if param.required:
                    required.append(param.name)
            variants.append(
                {"type": "object", "properties": properties, "required": required, "additionalProperties": False}
            )
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
            return {"type": "integer", "minimum": 1, "maximum": param.maximum or 1}
        if kind is Kind.SECONDS:
            return {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_WAIT_SECONDS}
        return {"type": "string"}


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
