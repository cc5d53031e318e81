"""The `holo3`, `holo3.1` and `holo4` profiles: H Company's Qwen3.5-based agents, served (vLLM) or in process.

What is public, and where it is from (checked for this module; H Company's pages are the source):
- H Company's "Agent loop" guide (its developer hub): each step is one object `{note, thought,
  tool_call}` with `tool_name` beside the arguments (the holotron profile's format); integer
  coordinates in [0, 1000] of the exact image sent, origin top-left; at most the last 3 screenshots
  in context, older ones replaced by a short text placeholder inside the `<observation>` wrapper;
  reasoning comes back in `reasoning_content` (vLLM 0.32 names it `reasoning`; the remote backend
  reads both) and is never spliced back into the conversation: the Qwen3.5 chat template drops past
  reasoning, so what a later step needs goes through `note`. Two output formats: structured outputs
  (Holo3 and Holo3.1) and native OpenAI tool calls (Holo3.1 only: "Holo3 does not support it").
- H Company's "Models" page: Holo3.1 35B-A3B answers in both formats; its hosted API accepts up to
  5 images a request and caps an answer at 4,096 tokens. Holo3.1 therefore keeps the agent-loop
  guide's last 3 screenshots (as Holo4 does), with a server limit of 5 as the hosted API's.
- holo-desktop-cli's self-hosting guide: Holo4 (27B, 35B-A3B) served by vLLM with
  `--enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser qwen3
  --chat-template-content-format openai --limit-mm-per-prompt '{"image": 5, "video": 0}'`; the
  CLI's model names are holo4-35b-a3b, holo4-27b and holo3-1-35b-a3b.
- Issue 31 (not checked against a public page): Holo3 is served with `--limit-mm-per-prompt
  '{"image": 1}'`: the holo3 profile sends one screenshot a request, the older ones as the
  placeholder. A server started with a larger limit can be given more with
  `budget=ImageBudget(images_per_request=3, keep_screenshots=3)`. (Holo3.1 was once held to one as
  well; that was wrong: H Company's guide for it says to keep the last 3.)

Holodesk's own choices, not H Company's: the tool vocabulary is the holotron profile's (H Company's
desktop harness names, taught in the system prompt and, in structured mode, the schema); in native
mode the same tools are declared as OpenAI functions, `tool_choice` is "auto" (the model writes its
own `<tool_call>` format and vLLM's qwen3_coder parser reads it: "required" would force vLLM's JSON
grammar instead, a format the model was not trained on), the message text holds `{note, thought}`,
and earlier steps go back as assistant `tool_calls` with the tool's output as a `tool` message; so does
a refused answer's call on the retry, its error as the tool's output (`refused_native_turns`).
Reasoning is on (`enable_thinking`, H Company: "essential in agent mode"), off for localization.
The parser never takes reasoning as the step's thought, so it cannot reach the next request's history.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

from holodesk.automation.actions import Point
from holodesk.automation.coords import NORMALIZED_MAX, NormalizedSpace
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, ImageBudget, Message, ParsedStep, PreparedImage
from holodesk.inference.profiles.holotron import (
    HOLOTRON_TOOLS,
    LOCALIZATION_PROMPT,
    MAX_REFUSED_ANSWER_CHARS,
    NAVIGATION_PROMPT,
    NAVIGATION_TOKENS,
    NAVIGATION_TOKENS_THINKING,
    HolotronProfile,
    conversation,
    navigation_schema,
    observation,
    tool_call,
    tool_output,
)
from holodesk.inference.profiles.parsing import (
    MalformedAnswer,
    decode_json_object,
    read_json_step,
    run_parser,
    split_reasoning,
    step_answer,
)
from holodesk.inference.profiles.prompting import (
    load_prompt,
    recent_images,
    screenshots_shown,
    text_part,
)
from holodesk.inference.profiles.vocabulary import POINTER
from holodesk.inference.tool_call_text import read_tool_call_text

# The vLLM flags every one of these models needs (holo-desktop-cli's self-hosting guide).
PARSER_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
    "--chat-template-content-format",
    "openai",
)
PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A tool call still in the model's own XML form: the server's tool parser did not read it (it is not
# started with one, or the call is malformed).
UNPARSED_CALL = "<function="
UNPARSED_HINT = (
    "the tool call is still in the model's XML form (<function=...>), which the server's tool parser did"
    " not turn into tool_calls: it is malformed, or vLLM runs without --enable-auto-tool-choice"
    " --tool-call-parser qwen3_coder"
)
# What a refused answer is written back as when it held nothing but (unfinished) reasoning.
NO_ANSWER = "(no answer: the reasoning did not end)"
NATIVE_SECTION = (
    "# Tool calls\n"
    "In this conversation the tools above are declared to you as functions. Call exactly one of them"
    " per step with a function call instead of writing a `tool_call` field, and write only"
    ' {"note": ..., "thought": ...} as your message text.'
)


def function_tools() -> tuple[dict[str, Any], ...]:
    """The taught tools as OpenAI function declarations (the structured schema's variants, untagged)."""
    declared = []
    for tool, variant in zip(HOLOTRON_TOOLS.documented, HOLOTRON_TOOLS.variant_schemas("tool_name"), strict=True):
        properties = {key: value for key, value in variant["properties"].items() if key != "tool_name"}
        parameters = {
            "type": "object",
            "properties": properties,
            "required": [key for key in variant["required"] if key != "tool_name"],
        }
        declared.append(
            {
                "type": "function",
                "function": {"name": tool.name, "description": tool.description, "parameters": parameters},
            }
        )
    return tuple(declared)


def step_text(step: PastStep) -> str:
    """An earlier step's message text in native mode: its note and thought, the call going in `tool_calls`."""
    return json.dumps({"note": step.note or None, "thought": step.thought}, ensure_ascii=False)


def native_conversation(system: str, task: str, history: Sequence[PastStep], images_shown: int) -> list[Message]:
    """The agent loop's layout with native tool calls: each earlier step is an assistant turn whose
    call is in `tool_calls`, then the tool's output (a `tool` message), then the next observation
    (a user message). Only the last `images_shown` observations carry an image.
    """
    observations = len(history) + 1
    first_image = observations - images_shown
    user: list[dict[str, Any]] = [text_part(f'<message from="user">\n{task.strip()}\n</message>\n')]
    user.extend(observation(first_image <= 0))
    messages: list[Message] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    for number, step in enumerate(history, start=1):
        call = tool_call(step.action, step.element)
        name = call.pop("tool_name")
        call_id = f"call_{number}"
        function = {"name": name, "arguments": json.dumps(call, ensure_ascii=False)}
        messages.append(
            {
                "role": "assistant",
                "content": step_text(step),
                "tool_calls": [{"id": call_id, "type": "function", "function": function}],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": tool_output(step)})
        messages.append({"role": "user", "content": observation(number >= first_image)})
    return messages


def refused_native_turns(said: str, error: str, again: str) -> list[Message]:
    """A refused native answer written back as the model gave it, then why it was refused.

    The calls (in the answer's text as `tool_call_text` wrote them, a form the model never produced) go
    back as the assistant's `tool_calls`, each answered by a `tool` message with the error, as a failed
    tool's output is in the history. A call whose arguments are not one JSON object cannot be written as
    a function call (vLLM hands templates the arguments as a mapping): it is left out, and the words say so.
    """
    text, calls = read_tool_call_text(said)
    text = text.strip()
    if len(text) > MAX_REFUSED_ANSWER_CHARS:
        text = text[:MAX_REFUSED_ANSWER_CHARS] + "..."
    readable = [_json_object(call.arguments) for call in calls]
    kept = [call for call, ok in zip(calls, readable, strict=True) if ok]
    left_out = [call.name or "(unnamed)" for call, ok in zip(calls, readable, strict=True) if not ok]
    because = f"Your answer could not be used: {error}\n"
    if left_out:
        because += f"(Your call to {', '.join(left_out)} is not shown above: its arguments were not one JSON object.)\n"
    because += f"Nothing was done. {again}"
    if not kept:
        content = text or ("(a tool call, left out)" if left_out else NO_ANSWER)
        return [
            {"role": "assistant", "content": content},
            {"role": "user", "content": [text_part(f'<error tool="tool_call">\n{because}\n</error>')]},
        ]
    ids = [f"refused_{number}" for number in range(1, len(kept) + 1)]
    functions = [{"name": call.name, "arguments": call.arguments} for call in kept]
    turns: list[Message] = [
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": function}
                for call_id, function in zip(ids, functions, strict=True)
            ],
        }
    ]
    for call_id, call in zip(ids, kept, strict=True):
        # The name as the tool's error names it; one that is not a plain name (unknown to every tool) is not
        # written inside the tag.
        name = call.name if PLAIN_NAME.fullmatch(call.name) else "tool_call"
        turns.append(
            {"role": "tool", "tool_call_id": call_id, "content": f'<error tool="{name}">\n{because}\n</error>'}
        )
    return turns


def _json_object(arguments: str) -> bool:
    try:
        decode_json_object(arguments, "the arguments")  # the parser's own reading (bounded, any depth)
    except MalformedAnswer:
        return False
    return True


class HoloAgentProfile(HolotronProfile):
    """The family: Holotron's step format and vocabulary, Qwen3.5's reasoning switch, each model's budget."""

    name: str
    space = NormalizedSpace(NORMALIZED_MAX)
    # The in-process engine (engine.qwen35) runs the family, proven against vLLM token for token, and
    # reads native tool calls as vLLM's qwen3_coder parser does (engine.qwen_tool_calls).
    runs_in_process = True
    default_budget: ClassVar[ImageBudget]
    # Whether the model answers with native tool calls by default, and whether it can at all.
    native_by_default: ClassVar[bool]
    native_supported: ClassVar[bool]
    # The `--limit-mm-per-prompt` its vLLM command sets.
    served_images: ClassVar[int]

    def __init__(
        self,
        budget: ImageBudget | None = None,
        *,
        think: bool = True,
        native_tools: bool | None = None,
        prompts_dir: Path | None = None,
    ) -> None:
        # HolotronProfile.__init__ is not called: its system turn carries Nemotron's /think flag.
        native = self.native_by_default if native_tools is None else native_tools
        if native and not self.native_supported:
            raise ValueError(
                f"{self.name} does not answer with native tool calls (H Company's agent-loop guide): "
                "use structured output (native_tools=False)"
            )
        self.budget = budget or self.default_budget
        self.think = think
        self.native_tools = native
        self._navigation_prompt = load_prompt(NAVIGATION_PROMPT, directory=prompts_dir)
        self._localization_prompt = load_prompt(LOCALIZATION_PROMPT, ("target",), directory=prompts_dir)
        prompt = self._navigation_prompt.render().strip()
        if native:
            self._system = f"{prompt}\n\n{NATIVE_SECTION}"
        else:
            schema = json.dumps(navigation_schema(), ensure_ascii=False)
            # The schema goes into the prompt as well as the request: H Company trained with it in both.
            self._system = f"{prompt}\n\n<output_format>\n```json\n{schema}\n```\n</output_format>"

    @classmethod
    def vllm_command(cls, checkpoint: str) -> str:
        """The vLLM command line this profile's requests need (`holodesk doctor` prints it)."""
        images = json.dumps({"image": cls.served_images, "video": 0}, separators=(", ", ": "))
        return f"vllm serve {checkpoint} {' '.join(PARSER_FLAGS)} --limit-mm-per-prompt '{images}'"

    def navigation_request(
        self, task: str, history: Sequence[PastStep], images: Sequence[PreparedImage]
    ) -> ChatRequest:
        if not task.strip():
            raise ValueError("the task is empty")
        shown = recent_images(images, self.budget)
        shown = shown[-screenshots_shown(len(history) + 1, self.budget) :]
        common: dict[str, Any] = {
            "images": [prepared.image for prepared in shown],
            "max_new_tokens": NAVIGATION_TOKENS_THINKING if self.think else NAVIGATION_TOKENS,
            "chat_template_kwargs": {"enable_thinking": self.think},
        }
        if self.native_tools:
            return ChatRequest(
                messages=native_conversation(self._system, task, history, len(shown)),
                tools=function_tools(),
                tool_choice="auto",
                **common,
            )
        return ChatRequest(
            messages=conversation(self._system, task, history, len(shown)),
            response_schema=navigation_schema(),
            **common,
        )

    def retry_request(self, request: ChatRequest, answer: str, error: str) -> ChatRequest:
        """As Holotron's, but the refused answer goes back without its reasoning (never fed back), and
        in native mode its calls go back as the model's own `tool_calls`, each answered by the error
        (`refused_native_turns`), and the model is asked for a function call rather than a JSON object."""
        try:
            said = split_reasoning(answer).answer or NO_ANSWER
        except MalformedAnswer:
            said = NO_ANSWER
        if not self.native_tools:
            return super().retry_request(request, said, error)
        turns = refused_native_turns(said, error, self._answer_again())
        return replace(request, messages=[*request.messages, *turns])

    def _answer_again(self) -> str:
        if self.native_tools:
            return "Answer again: call exactly one of the declared tools."
        return super()._answer_again()

    def localization_request(self, instruction: str, image: PreparedImage) -> ChatRequest:
        # H Company's element-localization guide: single turn, no thinking, the {x, y} schema.
        return replace(
            super().localization_request(instruction, image), chat_template_kwargs={"enable_thinking": False}
        )

    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        context = {POINTER: pointer} if pointer is not None else {}

        def parse(raw: str) -> ParsedStep:
            # The reasoning is set aside first: only the answer's own note and thought are kept, so
            # nothing of the reasoning reaches the history of the next request.
            answer = step_answer(raw).answer
            try:
                return read_json_step(answer, HOLOTRON_TOOLS, context)
            except MalformedAnswer as exc:
                if UNPARSED_CALL in answer:
                    raise MalformedAnswer(f"{exc}: {UNPARSED_HINT}") from exc
                raise

        return run_parser(parse, text, self.name)


class Holo3Profile(HoloAgentProfile):
    """Holo3 35B-A3B (Qwen3.5-35B-A3B fine-tune): structured output only, one screenshot a request."""

    name = "holo3"
    default_budget = ImageBudget(images_per_request=1, keep_screenshots=1)
    native_by_default = False
    native_supported = False
    served_images = 1


class Holo31Profile(HoloAgentProfile):
    """Holo3.1 (0.8B, 4B, 9B, 35B-A3B): structured output by default, native tool calls on request.

    The last 3 screenshots a request, the older ones as the placeholder: H Company's agent-loop guide for
    Holo3.1 says to keep the last 3. Its vLLM command allows 5 images, what H Company's hosted API
    accepts for Holo3.1 (its "Models" page), as Holo4's does.
    """

    name = "holo3.1"
    default_budget = ImageBudget(images_per_request=5, keep_screenshots=3)
    native_by_default = False
    native_supported = True
    served_images = 5


class Holo31ToolsProfile(Holo31Profile):
    """Holo3.1 asked for native tool calls (`tools` in, `tool_calls` out) instead of structured output."""

    name = "holo3.1-tools"
    native_by_default = True


class Holo4Profile(HoloAgentProfile):
    """Holo4 (27B, 35B-A3B): native tool calls, the last 3 of up to 5 screenshots a request."""

    name = "holo4"
    default_budget = ImageBudget(images_per_request=5, keep_screenshots=3)
    native_by_default = True
    native_supported = True
    served_images = 5
