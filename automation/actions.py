"""Immutable action types. Each validates itself on construction and fails with a specific error.

An action carries points in one coordinate space; which one is known to whoever holds it
(the profile's model space after parsing, screen space after `automation.coords` mapped it).
`map_points` returns the same action with its points converted, so mapping never needs to know
the action kinds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from holodesk.automation.errors import ActionError
from holodesk.automation.keys import MODIFIERS, normalize_key

# Far beyond any real desktop; stops absurd values before they reach arithmetic or the OS.
MAX_COORDINATE = 1_000_000
MAX_TEXT_LENGTH = 10_000
MAX_SCROLL_AMOUNT = 100  # H Company's scroll_desktop allows up to 100 wheel clicks
MAX_WAIT_SECONDS = 60.0
MAX_KEYS_IN_COMBINATION = 5
# H Company's harness bounds: a hotkey repeated at most 20 times, 1-3 held keys, 1-5 tapped keys.
MAX_KEY_REPEATS = 20
MAX_HELD_KEYS = 3
MAX_TAPPED_KEYS = 5
MAX_PLAN_GOALS = 20


def _require_int(value: object, what: str) -> int:
    # bool is an int subclass; True as a coordinate is always a bug upstream.
    if isinstance(value, bool) or not isinstance(value, int):
        raise ActionError(f"{what} must be an integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Point:
    """A point in whichever coordinate space the holder works in."""

    x: int
    y: int

    def __post_init__(self) -> None:
        for name in ("x", "y"):
            value = _require_int(getattr(self, name), f"coordinate {name}")
            if abs(value) > MAX_COORDINATE:
                raise ActionError(f"coordinate {name}={value} is out of bounds (|{name}| <= {MAX_COORDINATE})")

    def __str__(self) -> str:
        return f"({self.x}, {self.y})"


_E = TypeVar("_E", bound=StrEnum)


class MouseButton(StrEnum):
    LEFT = "left"
    RIGHT = "right"
    MIDDLE = "middle"


class ScrollDirection(StrEnum):
    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"


def _enum_value(enum: type[_E], value: object, what: str) -> _E:
    try:
        if isinstance(value, enum):
            return value
        return enum(str(value).lower()) if isinstance(value, str) else enum(str(value))
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise ActionError(f"unknown {what} {value!r} (expected one of: {allowed})") from None


def _require_point(value: object, what: str) -> Point:
    if not isinstance(value, Point):
        raise ActionError(f"{what} must be a Point, got {value!r}")
    return value


def _require_bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise ActionError(f"{what} must be true or false, got {value!r}")
    return value


def _key_names(keys: object, what: str, low: int, high: int) -> tuple[str, ...]:
    """1..n key names, normalized; a bare string is refused (it would be read letter by letter)."""
    if isinstance(keys, str) or not isinstance(keys, tuple | list):
        raise ActionError(f"{what} must be a sequence of key names, got {keys!r}")
    if not low <= len(keys) <= high:
        raise ActionError(f"{what} has {low} to {high} keys, got {len(keys)}")
    return tuple(normalize_key(key) for key in keys)


def _require_text(value: object, what: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise ActionError(f"{what} must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise ActionError(f"{what} is empty")
    if len(value) > MAX_TEXT_LENGTH:
        raise ActionError(f"{what} is {len(value)} characters long (at most {MAX_TEXT_LENGTH})")
    if "\x00" in value:
        raise ActionError(f"{what} contains a NUL character")
    return value


@dataclass(frozen=True, slots=True)
class Action:
    """Base of all actions. `kind` is the stable name used in trajectories and prompts."""

    kind: ClassVar[str] = "action"

    def points(self) -> tuple[Point, ...]:
        """The points this action touches, in order."""
        return tuple(getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Point))

    def map_points(self, convert: Callable[[Point], Point]) -> Action:
        """The same action with every point passed through `convert`."""
        changes = {
            f.name: convert(getattr(self, f.name)) for f in fields(self) if isinstance(getattr(self, f.name), Point)
        }
        return replace(self, **changes) if changes else self

    def describe(self) -> str:
        """The action in words, for the approval panel and the terminal."""
        return self.kind

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form that `action_from_dict` reads back."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Point):
                value = [value.x, value.y]
            elif isinstance(value, StrEnum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


@dataclass(frozen=True, slots=True)
class Click(Action):
    """Press and release a mouse button `count` times at a point."""

    kind: ClassVar[str] = "click"
    at: Point
    button: MouseButton = MouseButton.LEFT
    count: int = 1

    def __post_init__(self) -> None:
        _require_point(self.at, "click target")
        object.__setattr__(self, "button", _enum_value(MouseButton, self.button, "mouse button"))
        count = _require_int(self.count, "click count")
        if not 1 <= count <= 3:
            raise ActionError(f"click count must be 1, 2 or 3, got {count}")

    def describe(self) -> str:
        times = {1: "click", 2: "double-click", 3: "triple-click"}[self.count]
        button = "" if self.button is MouseButton.LEFT else f"{self.button.value} "
        return f"{button}{times} at {self.at}"


@dataclass(frozen=True, slots=True)
class Move(Action):
    """Move the pointer without pressing anything (hover)."""

    kind: ClassVar[str] = "move"
    to: Point

    def __post_init__(self) -> None:
        _require_point(self.to, "move target")

    def describe(self) -> str:
        return f"move the pointer to {self.to}"


@dataclass(frozen=True, slots=True)
class Drag(Action):
    """Press at `start`, move to `end`, release."""

    kind: ClassVar[str] = "drag"
    start: Point
    end: Point
    button: MouseButton = MouseButton.LEFT

    def __post_init__(self) -> None:
        _require_point(self.start, "drag start")
        _require_point(self.end, "drag end")
        object.__setattr__(self, "button", _enum_value(MouseButton, self.button, "mouse button"))

    def describe(self) -> str:
        return f"drag from {self.start} to {self.end}"


@dataclass(frozen=True, slots=True)
class Scroll(Action):
    """Scroll `amount` wheel notches in a direction, optionally after moving to a point."""

    kind: ClassVar[str] = "scroll"
    direction: ScrollDirection
    amount: int = 3
    at: Point | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", _enum_value(ScrollDirection, self.direction, "scroll direction"))
        amount = _require_int(self.amount, "scroll amount")
        if not 1 <= amount <= MAX_SCROLL_AMOUNT:
            raise ActionError(f"scroll amount must be between 1 and {MAX_SCROLL_AMOUNT}, got {amount}")
        if self.at is not None:
            _require_point(self.at, "scroll position")

    def describe(self) -> str:
        where = f" at {self.at}" if self.at is not None else ""
        return f"scroll {self.direction.value} {self.amount} notch{'es' if self.amount != 1 else ''}{where}"


@dataclass(frozen=True, slots=True)
class TypeText(Action):
    """Type text; with `at`, click there first to focus the field.

    `overwrite` replaces what the field holds (select all, then type over it); `press_enter`
    presses Enter after the text. Neither happens unless asked.
    """

    kind: ClassVar[str] = "type"
    text: str
    at: Point | None = None
    press_enter: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        _require_bool(self.press_enter, "press_enter")
        _require_bool(self.overwrite, "overwrite")
        # An empty text with press_enter presses Enter alone (models ask for that).
        _require_text(self.text, "text to type", allow_empty=self.press_enter)
        if self.press_enter and self.text and not self.text.strip():
            _require_text(self.text, "text to type")  # only whitespace is no text: say so
        # Windows line ends and lone CRs are one line break each, typed as Enter like "\n".
        object.__setattr__(self, "text", self.text.replace("\r\n", "\n").replace("\r", "\n"))
        if self.at is not None:
            _require_point(self.at, "typing position")

    def describe(self) -> str:
        shown = self.text if len(self.text) <= 60 else self.text[:57] + "..."
        where = f" at {self.at}" if self.at is not None else ""
        verb = "replace the field's text with" if self.overwrite else "type"
        breaks = self.text.count("\n")
        # A line break reaches the program as Enter: in a terminal it runs the line, so it is said.
        lines = f" (its {breaks} line break{'s' if breaks > 1 else ''} pressed as Enter)" if breaks else ""
        enter = ", then press Enter" if self.press_enter else ""
        if not self.text:
            return f"press Enter{where}" if not self.overwrite else f"select the field's text{where}, then press Enter"
        return f"{verb} {shown!r}{where}{lines}{enter}"


@dataclass(frozen=True, slots=True)
class KeyCombo(Action):
    """Press keys together and release them in reverse order (ctrl+c, alt+tab, enter)."""

    kind: ClassVar[str] = "key"
    keys: tuple[str, ...] = field(default=())
    repeat: int = 1  # the whole combination, pressed this many times

    def __post_init__(self) -> None:
        normalized = _key_names(self.keys, "a key combination", 1, MAX_KEYS_IN_COMBINATION)
        if len(set(normalized)) != len(normalized):
            raise ActionError(f"key combination repeats a key: {'+'.join(normalized)}")
        if all(key in MODIFIERS for key in normalized) and len(normalized) > 1:
            raise ActionError(f"key combination has only modifiers: {'+'.join(normalized)}")
        object.__setattr__(self, "keys", normalized)
        repeat = _require_int(self.repeat, "key repeat count")
        if not 1 <= repeat <= MAX_KEY_REPEATS:
            raise ActionError(f"a key combination repeats 1 to {MAX_KEY_REPEATS} times, got {repeat}")

    def describe(self) -> str:
        times = f" {self.repeat} times" if self.repeat > 1 else ""
        return f"press {'+'.join(self.keys)}{times}"


@dataclass(frozen=True, slots=True)
class HoldAndTap(Action):
    """Hold `hold` keys down, tap each of `taps` in order, release the held keys (shift + end, end)."""

    kind: ClassVar[str] = "hold_and_tap"
    hold: tuple[str, ...]
    taps: tuple[str, ...]

    def __post_init__(self) -> None:
        hold = _key_names(self.hold, "the keys to hold", 1, MAX_HELD_KEYS)
        taps = _key_names(self.taps, "the keys to tap", 1, MAX_TAPPED_KEYS)
        if len(set(hold)) != len(hold):
            raise ActionError(f"the keys to hold repeat a key: {'+'.join(hold)}")
        both = set(hold) & set(taps)
        if both:
            raise ActionError(f"{', '.join(sorted(both))} is both held and tapped")
        object.__setattr__(self, "hold", hold)
        object.__setattr__(self, "taps", taps)

    def describe(self) -> str:
        return f"hold {'+'.join(self.hold)} and press {', '.join(self.taps)}"


@dataclass(frozen=True, slots=True)
class Wait(Action):
    """Do nothing for a while (a page is loading)."""

    kind: ClassVar[str] = "wait"
    seconds: float = 1.0

    def __post_init__(self) -> None:
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds):
            raise ActionError(f"wait seconds must be a finite number, got {seconds!r}")
        if not 0 < seconds <= MAX_WAIT_SECONDS:
            raise ActionError(f"wait must be between 0 and {MAX_WAIT_SECONDS:g} seconds, got {seconds}")
        object.__setattr__(self, "seconds", float(seconds))

    def describe(self) -> str:
        return f"wait {self.seconds:g} s"


@dataclass(frozen=True, slots=True)
class Done(Action):
    """The task is finished; `answer` is what the model reports back."""

    kind: ClassVar[str] = "done"
    answer: str = ""

    def __post_init__(self) -> None:
        _require_text(self.answer, "answer", allow_empty=True)

    def describe(self) -> str:
        return f"finish: {self.answer}" if self.answer else "finish"


@dataclass(frozen=True, slots=True)
class AskUser(Action):
    """The model needs the user: a question, and the run pauses."""

    kind: ClassVar[str] = "ask_user"
    question: str

    def __post_init__(self) -> None:
        _require_text(self.question, "question")

    def describe(self) -> str:
        return f"ask: {self.question}"


class GoalStatus(StrEnum):
    TODO = "todo"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PlanGoal:
    """One goal of the model's plan: a title that starts with a verb, and how far it got."""

    title: str
    status: GoalStatus = GoalStatus.TODO

    def __post_init__(self) -> None:
        title = _require_text(self.title, "a goal's title")
        if len(title) > 500:
            raise ActionError(f"a goal's title is {len(title)} characters long (at most 500)")
        object.__setattr__(self, "status", _enum_value(GoalStatus, self.status, "goal status"))


@dataclass(frozen=True, slots=True)
class UpdatePlan(Action):
    """The model's plan, replaced as a whole. Changes nothing on screen: it is shown and remembered."""

    kind: ClassVar[str] = "plan"
    goals: tuple[PlanGoal, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.goals, tuple | list) or not 1 <= len(self.goals) <= MAX_PLAN_GOALS:
            raise ActionError(f"a plan has 1 to {MAX_PLAN_GOALS} goals, got {self.goals!r}")
        for goal in self.goals:
            if not isinstance(goal, PlanGoal):
                raise ActionError(f"a plan's goals must be PlanGoal, got {goal!r}")
        object.__setattr__(self, "goals", tuple(self.goals))

    def listing(self) -> str:
        """The plan as numbered lines, `1. Open the inbox [done]`."""
        return "\n".join(f"{number}. {goal.title} [{goal.status.value}]" for number, goal in enumerate(self.goals, 1))

    def describe(self) -> str:
        return "update the plan:\n" + self.listing()

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "goals": [{"title": g.title, "status": g.status.value} for g in self.goals]}


ACTION_TYPES: Mapping[str, type[Action]] = {
    cls.kind: cls
    for cls in (Click, Move, Drag, Scroll, TypeText, KeyCombo, HoldAndTap, Wait, Done, AskUser, UpdatePlan)
}
# Fields that hold a list of names or goals, not an [x, y] point.
_SEQUENCE_FIELDS = frozenset({"keys", "hold", "taps"})

# Actions that end the run rather than touch the desktop.
TERMINAL_KINDS = frozenset({Done.kind, AskUser.kind})


def action_from_dict(data: Mapping[str, Any]) -> Action:
    """Rebuild an action from `Action.to_dict()` output; every field is validated again."""
    if not isinstance(data, Mapping):
        raise ActionError(f"an action must be an object, got {type(data).__name__}")
    kind = data.get("kind")
    cls = ACTION_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ActionError(f"unknown action kind {kind!r}")
    known = {f.name: f for f in fields(cls)}
    unknown = set(data) - set(known) - {"kind"}
    if unknown:
        raise ActionError(f"unexpected fields for {kind}: {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name == "kind":
            continue
        if name == "goals" and isinstance(value, list):
            value = tuple(_goal_from_dict(goal) for goal in value)
        elif name in _SEQUENCE_FIELDS and isinstance(value, list):
            value = tuple(value)
        elif isinstance(value, list):
            if len(value) != 2:
                raise ActionError(f"{kind}.{name} must be [x, y], got {value!r}")
            value = Point(value[0], value[1])
        values[name] = value
    try:
        return cls(**values)
    except TypeError as exc:
        raise ActionError(f"malformed {kind} action: {exc}") from None


def _goal_from_dict(data: object) -> PlanGoal:
    if not isinstance(data, Mapping) or set(data) - {"title", "status"} or "title" not in data:
        raise ActionError(f"a plan goal must be {{title, status}}, got {data!r}")
    return PlanGoal(data["title"], data.get("status", GoalStatus.TODO))
