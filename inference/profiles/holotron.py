"""The `holotron` profile (default): H Company's desktop step, x and y in [0, 1000] of the image shown.

The model answers one JSON object per step, `{"note": ..., "thought": ..., "tool_call": {"tool_name":
..., <arguments>}}`, in the tool vocabulary of H Company's desktop harnesses (click_desktop,
write_desktop, update_plan, ...). The request is built as those harnesses build it: the system
prompt with the output schema, then the task, then one assistant turn per earlier step holding the
step's JSON, each followed by the tool's output and the next observation; only the last few
screenshots are sent, older ones become a short placeholder. `/no_think` (or `/think`) is sent in
the system turn. The parser also reads the older shapes (`"action"` objects, Surfer-H web actions,
`<tool_call>` blocks: see `parsing.read_json_step`). Localization answers `{"x": .., "y": ..}`.
Images go at full size (the Nemotron processor tiles them itself) unless the budget caps the long side.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    MouseButton,
    Move,
    PlanGoal,
    Point,
    Scroll,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.coords import NORMALIZED_MAX, NormalizedSpace
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, ImageBudget, Message, ParsedStep, PreparedImage, Profile
from holodesk.inference.profiles.parsing import MalformedAnswer, read_json_point, read_json_step, run_parser
from holodesk.inference.profiles.prompting import (
    IMAGE_PART,
    cap_long_side,
    load_prompt,
    localization_messages,
    prepare_at_size,
    recent_images,
    screenshots_shown,
    text_part,
)
from holodesk.inference.profiles.vocabulary import (
    ASK_USER,
    BUTTON,
    DIRECTION,
    OPTIONAL_X,
    OPTIONAL_Y,
    POINTER,
    SCHEMA_NOTE_CHARS,
    SCHEMA_THOUGHT_CHARS,
    SECONDS,
    Args,
    CoordinateRange,
    Kind,
    Param,
    Tool,
    ToolSet,
    X,
    Y,
    build_wait,
    click_builder,
    optional_point,
    point,
    scroll_builder,
    write_builder,
)

# == the vocabulary =================================================================================

CONTENT = Param("content", Kind.TEXT, aliases=("text",))
# The target's description: H Company's pointer tools require it; older shapes may leave it out.
ELEMENT = Param("element", Kind.LABEL, required=False, demanded=True, aliases=("element_description",))
OLD_ELEMENT = Param("element", Kind.LABEL, required=False, aliases=("element_description",))
PRESS_ENTER = Param("press_enter", Kind.FLAG, required=False)
OVERWRITE = Param("overwrite", Kind.FLAG, required=False)
SCROLL_SIZE = Param("scroll_size", Kind.COUNT, required=False, aliases=("amount",), maximum=100)
# H Company's scroll_desktop scrolls 10 wheel clicks when the model leaves scroll_size out.
DEFAULT_SCROLL_SIZE = 10
UNTAUGHT_X = Param("x", Kind.X, required=False, taught=False)
UNTAUGHT_Y = Param("y", Kind.Y, required=False, taught=False)
UNTAUGHT_BUTTON = Param("button", Kind.BUTTON, required=False, taught=False)
UNTAUGHT_CLICKS = Param("clicks", Kind.COUNT, required=False, aliases=("count",), maximum=3, taught=False)


def _drag_to(args: Args) -> Action:
    """drag_to_desktop: from where the pointer is (or from start_x, start_y, an older shape) to (x, y)."""
    start = optional_point(args, "drag_to_desktop", "start_x", "start_y")
    if start is None:
        start = args.get(POINTER)
    if start is None:
        raise MalformedAnswer(
            "drag_to_desktop drags from where the pointer is, and no earlier step put it anywhere:"
            " call move_to_desktop first (or give start_x and start_y)"
        )
    return Drag(start, point(args), button=args.get("button", MouseButton.LEFT))


def _drag_and_drop(args: Args) -> Action:
    if args.get("hold_keys"):
        raise MalformedAnswer("drag_and_drop cannot hold keys while dragging here; drag without hold_keys")
    return Drag(point(args, "x1", "y1"), point(args, "x2", "y2"))


def _hold_and_tap(args: Args) -> Action:
    taps = args["tap_keys"]
    count = args.get("count", 1)
    if count != 1:  # the older shape: one tap key pressed `count` times
        if len(taps) != 1:
            raise MalformedAnswer("hold_and_tap_key_desktop repeats one tap key, not several")
        taps = taps * count
    return HoldAndTap(args["hold_keys"], taps)


_LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


def _update_plan(args: Args) -> Action:
    if "goals" in args:
        return UpdatePlan(args["goals"])
    if "plan" in args:  # the older shape: the plan as text, one goal a line
        lines = [_LIST_MARK.sub("", line).strip() for line in str(args["plan"]).splitlines()]
        goals = tuple(PlanGoal(line) for line in lines if line)
        if goals:
            return UpdatePlan(goals)
    raise MalformedAnswer('update_plan needs "goals": a list of {"title", "status"}')


_UNSUPPORTED_WEB = (
    "{name} belongs to a web browser agent; Holodesk drives the whole desktop, where it is not"
    " supported (click the browser's address bar and type instead)"
)
_UNSUPPORTED_HOLD = (
    "{name} holds a key or button across steps, which is not supported (a stopped run could leave it"
    " held); use hotkey_desktop, hold_and_tap_key_desktop or drag_to_desktop instead"
)

HOLOTRON_TOOLS = ToolSet(
    [
        # -- H Company's desktop tools (taught: the schema and the prompt list these) --
        Tool(
            "update_plan",
            (
                Param("goals", Kind.GOALS, required=False, demanded=True),
                Param("plan", Kind.PLAN, required=False, aliases=("content", "steps", "text"), taught=False),
            ),
            _update_plan,
            description="Replace the plan: the complete list of goals, at most one 'running'",
        ),
        Tool(
            "click_desktop",
            (ELEMENT, X, Y, BUTTON, UNTAUGHT_CLICKS),
            click_builder(1),
            positional=("x", "y", "button", "clicks", "element"),
            description="Click at (x, y)",
        ),
        Tool(
            "double_click_desktop",
            (ELEMENT, X, Y, UNTAUGHT_BUTTON),
            click_builder(2),
            positional=("x", "y", "button", "element"),
            description="Double click at (x, y)",
        ),
        Tool(
            "move_to_desktop",
            (ELEMENT, X, Y),
            lambda args: Move(point(args)),
            positional=("x", "y", "element"),
            description="Move the pointer to (x, y) without clicking",
        ),
        Tool(
            "drag_to_desktop",
            (
                ELEMENT,
                Param("x", Kind.X, aliases=("end_x", "to_x", "x2")),
                Param("y", Kind.Y, aliases=("end_y", "to_y", "y2")),
                Param("start_x", Kind.X, required=False, aliases=("from_x", "x1"), taught=False),
                Param("start_y", Kind.Y, required=False, aliases=("from_y", "y1"), taught=False),
                UNTAUGHT_BUTTON,
            ),
            _drag_to,
            positional=("start_x", "start_y", "x", "y", "button", "element"),
            description="Drag from where the pointer is (move_to_desktop first) to (x, y)",
        ),
        Tool(
            "scroll_desktop",
            (ELEMENT, OPTIONAL_X, OPTIONAL_Y, DIRECTION, SCROLL_SIZE),
            scroll_builder("scroll_desktop", "scroll_size", DEFAULT_SCROLL_SIZE),
            positional=("direction", "scroll_size", "x", "y", "element"),
            description="Scroll with the pointer at (x, y), by scroll_size wheel clicks",
        ),
        Tool(
            "write_desktop",
            (CONTENT, PRESS_ENTER, OVERWRITE, UNTAUGHT_X, UNTAUGHT_Y),
            write_builder("write_desktop"),
            positional=("content", "x", "y", "press_enter", "overwrite"),
            description="Type into the focused field; overwrite replaces its text; press_enter presses Enter after",
        ),
        Tool(
            "write_at_desktop",
            (CONTENT, ELEMENT, X, Y, PRESS_ENTER, OVERWRITE),
            write_builder("write_at_desktop", needs_point=True),
            description="Click at (x, y) to focus a field, then type content",
        ),
        Tool(
            "hotkey_desktop",
            (
                Param("keys", Kind.KEY_LIST, aliases=("key", "hotkey", "combination"), maximum=5),
                Param("repeat_count", Kind.COUNT, required=False, aliases=("repeat",), maximum=20),
            ),
            lambda args: KeyCombo(args["keys"], repeat=args.get("repeat_count", 1)),
            description="Press keys together (a shortcut), repeat_count times",
        ),
        Tool(
            "hold_and_tap_key_desktop",
            (
                Param("hold_keys", Kind.KEY_LIST, aliases=("hold_key", "hold", "modifiers", "modifier"), maximum=3),
                Param("tap_keys", Kind.KEY_LIST, aliases=("tap_key", "tap", "key"), maximum=5),
                Param("count", Kind.COUNT, required=False, aliases=("times", "taps"), maximum=5, taught=False),
            ),
            _hold_and_tap,
            description="Hold hold_keys down while tapping tap_keys in order",
        ),
        Tool("wait_desktop", (SECONDS,), build_wait, aliases=("wait",), description="Wait for the screen to change"),
        Tool(
            "answer",
            (Param("content", Kind.TEXT, required=False, demanded=True, aliases=("text", "answer")),),
            lambda args: Done(args.get("content", "")),
            description="The task is done (or cannot be done): the final answer for the user",
        ),
        # -- ours: the run pauses for the user --
        ASK_USER,
        # -- accepted, not taught --
        Tool(
            "drag_and_drop",
            (
                Param("description", Kind.LABEL, required=False),
                Param("x1", Kind.X),
                Param("y1", Kind.Y),
                Param("x2", Kind.X),
                Param("y2", Kind.Y),
                Param("hold_keys", Kind.KEY_LIST, required=False, maximum=3),
            ),
            _drag_and_drop,
            documented=False,
        ),
        Tool("key_down_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_down_desktop")),
        Tool("key_up_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="key_up_desktop")),
        Tool("mouse_down_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="mouse_down_desktop")),
        Tool("mouse_up_desktop", documented=False, refusal=_UNSUPPORTED_HOLD.format(name="mouse_up_desktop")),
        # Surfer-H web actions, and Holo3's click/write.
        Tool("click_element", (OLD_ELEMENT, X, Y), click_builder(1), aliases=("click",), documented=False),
        Tool(
            "write_element",
            (CONTENT, OLD_ELEMENT, OPTIONAL_X, OPTIONAL_Y),
            write_builder("write_element", needs_point=True),
            documented=False,
        ),
        Tool(
            "write",
            (CONTENT, OLD_ELEMENT, OPTIONAL_X, OPTIONAL_Y),
            write_builder("write", needs_point=False),
            documented=False,
        ),
        Tool(
            "scroll",
            (DIRECTION, OLD_ELEMENT, Param("amount", Kind.COUNT, required=False, maximum=100), OPTIONAL_X, OPTIONAL_Y),
            scroll_builder("scroll"),
            documented=False,
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


def tool_call(action: Action, element: str = "") -> dict[str, Any]:
    """`action` as the tool call the prompt teaches: `{"tool_name": ..., <arguments>}`.

    Used to write earlier steps back to the model; `element` is the model's description of the target.
    """
    target = {"element": element} if element else {}

    def at(p: Point) -> dict[str, int]:
        return {"x": p.x, "y": p.y}

    match action:
        case Click(at=where, button=button, count=count):
            extra: dict[str, Any] = {"button": button.value} if button is not MouseButton.LEFT else {}
            if count == 2 and button is MouseButton.LEFT:
                return {"tool_name": "double_click_desktop", **target, **at(where)}
            if count != 1:
                extra["clicks"] = count
            return {"tool_name": "click_desktop", **target, **at(where), **extra}
        case Move(to=to):
            return {"tool_name": "move_to_desktop", **target, **at(to)}
        case Drag(start=start, end=end, button=button):
            # The start is written out: the pointer may not be there any more when the model reads this.
            extra = {"button": button.value} if button is not MouseButton.LEFT else {}
            return {
                "tool_name": "drag_to_desktop",
                **target,
                **at(end),
                "start_x": start.x,
                "start_y": start.y,
                **extra,
            }
        case Scroll(direction=direction, amount=amount, at=where):
            position = at(where) if where is not None else {}
            return {
                "tool_name": "scroll_desktop",
                **target,
                **position,
                "direction": direction.value,
                "scroll_size": amount,
            }
        case TypeText(text=text, at=where, press_enter=press_enter, overwrite=overwrite):
            options = {"press_enter": press_enter, "overwrite": overwrite}
            if where is None:
                return {"tool_name": "write_desktop", "content": text, **options}
            return {"tool_name": "write_at_desktop", "content": text, **target, **at(where), **options}
        case KeyCombo(keys=keys, repeat=repeat):
            return {"tool_name": "hotkey_desktop", "keys": list(keys), "repeat_count": repeat}
        case HoldAndTap(hold=hold, taps=taps):
            return {"tool_name": "hold_and_tap_key_desktop", "hold_keys": list(hold), "tap_keys": list(taps)}
        case UpdatePlan(goals=goals):
            return {"tool_name": "update_plan", "goals": [{"title": g.title, "status": g.status.value} for g in goals]}
        case Wait(seconds=seconds):
            return {"tool_name": "wait_desktop", "seconds": int(seconds) if seconds.is_integer() else seconds}
        case Done(answer=answer):
            return {"tool_name": "answer", "content": answer}
        case AskUser(question=question):
            return {"tool_name": "ask_user", "question": question}
    raise ValueError(f"no Holotron tool for {action!r}")


def step_json(step: PastStep) -> str:
    """An earlier step as the assistant turn that holds it: the step object, on one line."""
    payload = {"note": step.note or None, "thought": step.thought, "tool_call": tool_call(step.action, step.element)}
    return json.dumps(payload, ensure_ascii=False)


def tool_output(step: PastStep) -> str:
    """What the tool answered for an earlier step, as the harness sends it back."""
    name = tool_call(step.action)["tool_name"]
    if step.outcome.startswith("failed"):
        return f'<error tool="{name}">\n{step.outcome}\n</error>'
    # What became of it, then what it gave back (how text was typed, "no visible change", a reply).
    said = [text for text in (step.outcome, step.result) if text]
    if said:
        result = "\n".join(said)
    elif isinstance(step.action, UpdatePlan):
        result = step.action.listing()
    elif isinstance(step.action, Wait):
        result = "Waited."
    else:
        result = ""  # an action that ran: the next observation shows its effect
    return f'<tool_output tool="{name}">\n{result}\n</tool_output>'


# == the profile ====================================================================================

NAVIGATION_PROMPT = "holotron_navigation"
LOCALIZATION_PROMPT = "holotron_localization"
# A step is a short JSON object; with reasoning on, the <think> block comes first and is long.
NAVIGATION_TOKENS = 512
NAVIGATION_TOKENS_THINKING = 4096
LOCALIZATION_TOKENS = 64
# Nemotron-Nano-v2's chat template reasons unless the system turn says /no_think; sent either way.
THINK_FLAG = "/think"
NO_THINK_FLAG = "/no_think"
# What stands for a screenshot no longer sent (H Company's harnesses use this text).
IMAGE_PLACEHOLDER = "[Image omitted by context cleaning]"
# A refused answer is sent back at most this long: enough to see the mistake, bounded.
MAX_REFUSED_ANSWER_CHARS = 4_000


def navigation_schema() -> dict[str, Any]:
    """JSON schema of one step, for structured output: note, thought and one tool call of the taught tools.

    Every free value is bounded, so a server that constrains decoding to it can always finish the
    answer (see schema_bounds; the remote backend asks for that many tokens).
    """
    return {
        "type": "object",
        "properties": {
            "note": {"anyOf": [{"type": "string", "maxLength": SCHEMA_NOTE_CHARS}, {"type": "null"}]},
            "thought": {"type": "string", "maxLength": SCHEMA_THOUGHT_CHARS},
            "tool_call": {"anyOf": HOLOTRON_TOOLS.variant_schemas("tool_name")},
        },
        "required": ["note", "thought", "tool_call"],
        "additionalProperties": False,
    }


def localization_schema() -> dict[str, Any]:
    coordinate = {"type": "integer", "minimum": 0, "maximum": NORMALIZED_MAX}
    return {
        "type": "object",
        "properties": {"x": coordinate, "y": coordinate},
        "required": ["x", "y"],
        "additionalProperties": False,
    }


def observation(image: bool) -> list[dict[str, Any]]:
    """One observation's parts: the screenshot in its wrapper, or the placeholder that stands for it."""
    if not image:
        return [text_part(f"<observation>\n{IMAGE_PLACEHOLDER}\n</observation>")]
    return [text_part("<observation>\n"), IMAGE_PART, text_part("\n</observation>")]


def conversation(system: str, task: str, history: Sequence[PastStep], images_shown: int) -> list[Message]:
    """The harness's message layout: task and first observation, then per earlier step its JSON
    (assistant), its tool output and the next observation (user). Only the last `images_shown`
    observations carry an image; the older ones a placeholder.
    """
    observations = len(history) + 1
    first_image = observations - images_shown
    user: list[dict[str, Any]] = [text_part(f'<message from="user">\n{task.strip()}\n</message>\n')]
    user.extend(observation(first_image <= 0))
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for number, step in enumerate(history, start=1):
        messages.append({"role": "assistant", "content": step_json(step)})
        user = [text_part(tool_output(step) + "\n"), *observation(number >= first_image)]
        messages.append({"role": "user", "content": user})
    return messages


class HolotronProfile(Profile):
    """Holotron-12B (and H Company's JSON-step models): NormalizedSpace, [0, 1000]."""

    name = "holotron"
    space = NormalizedSpace(NORMALIZED_MAX)
    runs_in_process = True

    def __init__(self, budget: ImageBudget | None = None, *, think: bool = False, prompts_dir: Path | None = None):
        self.budget = budget or ImageBudget()
        self.think = think
        self._navigation_prompt = load_prompt(NAVIGATION_PROMPT, directory=prompts_dir)
        self._localization_prompt = load_prompt(LOCALIZATION_PROMPT, ("target",), directory=prompts_dir)
        schema = json.dumps(navigation_schema(), ensure_ascii=False)
        # The schema the answer is held to goes into the prompt too, as H Company's harnesses do.
        self._system = (
            f"{THINK_FLAG if think else NO_THINK_FLAG}\n{self._navigation_prompt.render().strip()}\n\n"
            f"<output_format>\n```json\n{schema}\n```\n</output_format>"
        )

    def prepare_image(self, frame: ScreenFrame) -> PreparedImage:
        return prepare_at_size(frame, cap_long_side(frame.width, frame.height, self.budget.max_long_side))

    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        if not task.strip():
            raise ValueError("the task is empty")
        shown = recent_images(images, self.budget)
        # Every earlier step is followed by an observation; there are never more images than those.
        shown = shown[-screenshots_shown(len(history) + 1, self.budget) :]
        return ChatRequest(
            messages=conversation(self._system, task, history, len(shown)),
            images=[prepared.image for prepared in shown],
            max_new_tokens=NAVIGATION_TOKENS_THINKING if self.think else NAVIGATION_TOKENS,
            response_schema=navigation_schema(),
        )

    def retry_request(self, request: ChatRequest, answer: str, error: str) -> ChatRequest:
        """The same conversation, the refused answer, and the parser's error as the tool's output."""
        refused = answer if len(answer) <= MAX_REFUSED_ANSWER_CHARS else answer[:MAX_REFUSED_ANSWER_CHARS] + "..."
        feedback = (
            f'<error tool="tool_call">\nYour answer could not be used: {error}\n'
            f"Nothing was done. {self._answer_again()}\n</error>"
        )
        return self._with_turns(request, refused, feedback)

    def _answer_again(self) -> str:
        """What a retry asks for: the answer's format."""
        return "Answer again with exactly one JSON object that follows the output format."

    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        if not instruction.strip():
            raise ValueError("the element description is empty")
        prompt = self._localization_prompt.render(target=instruction.strip())
        return ChatRequest(
            messages=localization_messages(prompt),
            images=[image.image],
            max_new_tokens=LOCALIZATION_TOKENS,
            response_schema=localization_schema(),
        )

    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        context = {POINTER: pointer} if pointer is not None else {}
        return run_parser(lambda raw: read_json_step(raw, HOLOTRON_TOOLS, context), text, self.name)

    def parse_localization(self, text: str) -> Point:
        return run_parser(lambda raw: read_json_point(raw, HOLOTRON_TOOLS.coordinates), text, self.name)
