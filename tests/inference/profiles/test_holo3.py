"""The holo3, holo3.1 and holo4 profiles: requests (tools or schema, images, reasoning switch) and parsing.

The same profiles run against a real vLLM with the real parsers in tests/vllm/test_holo_on_vllm.py;
here, what the requests hold and what the parser makes of each shape of answer, without a server.
"""

from __future__ import annotations

import json

import pytest

from holodesk.automation.actions import Click, Point, TypeText
from holodesk.automation.coords import NormalizedSpace
from holodesk.inference.errors import ParseError
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ImageBudget
from holodesk.inference.profiles.holo3 import Holo3Profile, Holo4Profile, Holo31Profile, function_tools
from holodesk.inference.profiles.holotron import HOLOTRON_TOOLS, IMAGE_PLACEHOLDER
from tests.inference.profiles.test_registry import frame

REASONING = "The secret plan is to click the inbox."


def native_answer(name: str, arguments: str, content: str = "", reasoning: str = REASONING) -> str:
    """What the remote backend makes of a vLLM answer with `tool_calls` (inference/remote/answers.py)."""
    from holodesk.inference.remote.answers import answer_text
    from holodesk.inference.tool_call_text import ToolCallPiece

    return answer_text(reasoning, content, [ToolCallPiece(name, arguments)])


def history(count: int) -> list[PastStep]:
    return [
        PastStep(Click(Point(100 * n, 200)), note=f"note {n}", thought=f"thought {n}", element=f"button {n}")
        for n in range(1, count + 1)
    ]


def images(profile: Holo3Profile | Holo31Profile | Holo4Profile, count: int) -> list:  # type: ignore[type-arg]
    return [profile.prepare_image(frame(1280, 800)) for _ in range(count)]


# -- the registry and the models' facts -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [("holo3", Holo3Profile), ("Holo3-1", Holo31Profile), ("holo-3.1", Holo31Profile), ("HOLO4", Holo4Profile)],
)
def test_names_reach_their_profile(name: str, cls: type) -> None:
    profile = get_profile(name)
    assert type(profile) is cls
    assert profile.space == NormalizedSpace(1000)


def test_each_model_has_its_image_limit_and_format() -> None:
    assert (Holo3Profile().budget.images_per_request, Holo3Profile().native_tools) == (1, False)
    holo31 = Holo31Profile()
    assert (holo31.budget.images_per_request, holo31.budget.keep_screenshots, holo31.native_tools) == (5, 3, False)
    assert Holo31Profile(native_tools=True).native_tools
    holo4 = Holo4Profile()
    assert (holo4.budget.images_per_request, holo4.budget.keep_screenshots, holo4.native_tools) == (5, 3, True)
    with pytest.raises(ValueError, match="holo3 does not answer with native tool calls"):
        Holo3Profile(native_tools=True)


@pytest.mark.parametrize("name", ["holo3.1-tools", "Holo3.1-native"])
def test_holo31_with_native_tool_calls_is_a_profile_the_settings_and_the_command_line_can_name(name: str) -> None:
    profile = get_profile(name)
    assert profile.name == "holo3.1-tools" and profile.native_tools
    assert profile.budget == Holo31Profile().budget
    request = profile.navigation_request("Archive the mail", history(2), images(profile, 3))
    assert request.tool_choice == "auto" and request.response_schema is None
    assert "click_desktop" in [tool["function"]["name"] for tool in request.tools]
    assert len(request.images) == 3  # Holo3.1's last 3 screenshots either way
    # The plain name keeps structured output.
    plain = get_profile("holo3.1").navigation_request("Archive the mail", history(2), images(profile, 3))
    assert plain.tools == () and plain.response_schema is not None


def test_the_vllm_command_names_the_parsers_and_the_image_limit() -> None:
    command = Holo4Profile.vllm_command("Hcompany/Holo4-35B-A3B")
    assert command.startswith("vllm serve Hcompany/Holo4-35B-A3B ")
    for flag in ("--enable-auto-tool-choice", "--tool-call-parser qwen3_coder", "--reasoning-parser qwen3"):
        assert flag in command
    assert '--limit-mm-per-prompt \'{"image": 5, "video": 0}\'' in command
    assert '\'{"image": 1, "video": 0}\'' in Holo3Profile.vllm_command("x")
    assert '\'{"image": 5, "video": 0}\'' in Holo31Profile.vllm_command("x")  # what the hosted API accepts


# -- requests ---------------------------------------------------------------------------------------


def test_holo4_declares_the_tools_and_sends_the_last_three_screenshots() -> None:
    profile = Holo4Profile()
    request = profile.navigation_request("Archive the mail", history(4), images(profile, 5))
    assert request.response_schema is None
    assert request.tool_choice == "auto"
    assert [tool["function"]["name"] for tool in request.tools] == [tool.name for tool in HOLOTRON_TOOLS.documented]
    assert request.chat_template_kwargs == {"enable_thinking": True}
    assert len(request.images) == 3
    text = json.dumps(request.messages)
    assert text.count(IMAGE_PLACEHOLDER) == 2  # five observations, the two oldest as the placeholder
    # Earlier steps are assistant tool calls, each answered by a tool message, then the next observation.
    calls = [m for m in request.messages if m.get("tool_calls")]
    assert len(calls) == 4 and [m["role"] for m in request.messages].count("tool") == 4
    first = calls[0]["tool_calls"][0]["function"]
    assert first["name"] == "click_desktop"
    assert json.loads(first["arguments"]) == {"element": "button 1", "x": 100, "y": 200}
    assert json.loads(calls[0]["content"]) == {"note": "note 1", "thought": "thought 1"}


def test_the_declared_tools_are_the_schema_variants_without_their_tag() -> None:
    click = next(tool["function"] for tool in function_tools() if tool["function"]["name"] == "click_desktop")
    assert set(click["parameters"]["properties"]) == {"element", "x", "y", "button"}
    assert click["parameters"]["required"] == ["element", "x", "y"]
    assert click["parameters"]["properties"]["x"] == {"type": "integer", "minimum": 0, "maximum": 1000}


@pytest.mark.parametrize(("cls", "shown"), [(Holo3Profile, 1), (Holo31Profile, 3)], ids=["holo3", "holo3.1"])
def test_holo3_and_holo31_ask_for_the_schema_with_their_last_screenshots(cls: type[Holo3Profile], shown: int) -> None:
    """Holo3 one screenshot (its served limit), Holo3.1 the last 3 (H Company's guide for Holo3.1)."""
    profile = cls()
    shots = images(profile, 5)
    request = profile.navigation_request("Archive the mail", history(4), shots)
    assert request.tools == () and request.tool_choice is None
    assert request.response_schema is not None and "tool_call" in request.response_schema["properties"]
    assert len(request.images) == shown
    assert all(sent is shot.image for sent, shot in zip(request.images, shots[-shown:], strict=True))
    assert json.dumps(request.messages).count(IMAGE_PLACEHOLDER) == 5 - shown  # the older observations
    assert "/no_think" not in request.messages[0]["content"] and "/think" not in request.messages[0]["content"]
    assert request.max_new_tokens == 4096


def test_another_budget_is_honoured() -> None:
    larger = Holo3Profile(ImageBudget(images_per_request=3, keep_screenshots=3))
    assert len(larger.navigation_request("task", history(4), images(larger, 5)).images) == 3
    smaller = Holo31Profile(ImageBudget(images_per_request=1, keep_screenshots=1))
    assert len(smaller.navigation_request("task", history(4), images(smaller, 5)).images) == 1


def test_localization_turns_reasoning_off() -> None:
    profile = Holo4Profile()
    request = profile.localization_request("the inbox", images(profile, 1)[0])
    assert request.chat_template_kwargs == {"enable_thinking": False}
    assert request.tools == ()
    assert profile.parse_localization('{"x": 10, "y": 990}') == Point(10, 990)


# -- parsing: native tool calls, structured answers, reasoning --------------------------------------


def test_a_native_tool_call_becomes_the_action_and_the_reasoning_is_not_its_thought() -> None:
    text = native_answer("click_desktop", '{"element": "Inbox", "x": 120, "y": 340}')
    step = Holo4Profile().parse_navigation(text)
    assert step.action == Click(Point(120, 340))
    assert step.element == "Inbox"
    assert step.thought == "" and REASONING not in step.note


def test_note_and_thought_come_from_the_message_text() -> None:
    content = '{"note": "Total is 12 EUR", "thought": "Type the total."}'
    text = native_answer("write_desktop", '{"content": "12"}', content=content)
    step = Holo4Profile().parse_navigation(text)
    assert step.action == TypeText("12")
    assert (step.note, step.thought) == ("Total is 12 EUR", "Type the total.")


def test_a_message_text_with_an_empty_tool_call_field_is_only_the_note_and_thought() -> None:
    """The step object's shape with its action left null: the holo prompt's examples invite it (held-out Holo4)."""
    content = '{"note": null, "thought": "Open the inbox.", "tool_call": null}'
    step = Holo4Profile().parse_navigation(native_answer("click_desktop", '{"x": 120, "y": 340}', content=content))
    assert step.action == Click(Point(120, 340))
    assert (step.note, step.thought) == ("", "Open the inbox.")


@pytest.mark.parametrize(
    "content",
    [
        '{"note": null, "thought": "Both.", "tool_call": {"tool_name": "click_desktop", "x": 5, "y": 6}}',
        '{"thought": "Both.", "action": "wait"}',
        '{"thought": "Both.", "tool_call": null, "button": "left"}',
    ],
)
def test_a_message_text_that_holds_an_action_beside_the_tool_call_is_refused(content: str) -> None:
    with pytest.raises(ParseError, match="the text around the tool calls holds another action"):
        Holo4Profile().parse_navigation(native_answer("click_desktop", '{"x": 120, "y": 340}', content=content))


def test_a_structured_answer_after_reasoning_is_read_without_it() -> None:
    answer = {"note": None, "thought": "Click it.", "tool_call": {"tool_name": "click_desktop", "x": 5, "y": 6}}
    text = f"<think>{REASONING}</think>{json.dumps(answer)}"
    step = Holo3Profile().parse_navigation(text)
    assert step.action == Click(Point(5, 6)) and step.thought == "Click it."


@pytest.mark.parametrize(
    ("name", "arguments", "said"),
    [
        ("click_desktop", '{"x": 120, "y": ', "the arguments of click_desktop must be exactly one JSON object"),
        ("click_desktop", '{"x": 1200, "y": 5, "element": "far"}', "x=1200 is outside [0, 1000]"),
        ("launch_rockets", "{}", "unknown action 'launch_rockets'"),
        ("click_desktop", '{"y": 5, "element": "Inbox"}', "click_desktop needs 'x'"),
    ],
)
def test_a_malformed_tool_call_is_refused_in_words(name: str, arguments: str, said: str) -> None:
    with pytest.raises(ParseError, match="holo4: ") as caught:
        Holo4Profile().parse_navigation(native_answer(name, arguments))
    assert said in str(caught.value)


def test_a_tool_call_left_in_the_text_unparsed_is_refused() -> None:
    """What vLLM returns when its qwen3_coder parser cannot read the call: the raw XML as content."""
    raw = "<tool_call>\n<function=click_desktop>\n<parameter=x>\n120\n</parameter>\n</function>\n</tool_call>"
    with pytest.raises(ParseError, match=r"holo4: .*tool_call") as caught:
        Holo4Profile().parse_navigation(f"<think>{REASONING}</think>{raw}")
    assert "vLLM runs without --enable-auto-tool-choice --tool-call-parser qwen3_coder" in str(caught.value)


def test_an_answer_cut_inside_its_reasoning_is_refused() -> None:
    with pytest.raises(ParseError, match="stops inside <think> reasoning"):
        Holo4Profile().parse_navigation("<think>I will first")


def test_a_retry_sends_the_refused_answer_back_without_its_reasoning() -> None:
    profile = Holo4Profile()
    request = profile.navigation_request("task", [], images(profile, 1))
    refused = native_answer("launch_rockets", "{}")
    retry = profile.retry_request(request, refused, "unknown action")
    written = json.dumps(retry.messages[-2:])
    assert "launch_rockets" in written and "secret plan" not in written
    assert "call exactly one of the declared tools" in written
    structured = Holo3Profile()
    asked = structured.retry_request(structured.navigation_request("task", [], images(structured, 1)), refused, "x")
    assert "exactly one JSON object" in json.dumps(asked.messages[-1]) and "secret plan" not in json.dumps(
        asked.messages
    )
    cut = profile.retry_request(request, "<think>never ends", "no action")
    assert "never ends" not in json.dumps(cut.messages[-2:])


def test_a_refused_native_call_goes_back_as_the_models_own_tool_call() -> None:
    """Not as Holodesk's `<tool_call>` text (the form the backends hand the parser), which the model never wrote."""
    profile = Holo4Profile()
    request = profile.navigation_request("task", history(1), images(profile, 2))
    content = '{"note": null, "thought": "Launch them."}'
    refused = native_answer("launch_rockets", '{"count": 3}', content=content)
    retry = profile.retry_request(request, refused, "holo4: unknown action 'launch_rockets'")
    assert retry.messages[: len(request.messages)] == request.messages
    added = retry.messages[len(request.messages) :]
    assert [message["role"] for message in added] == ["assistant", "tool"]
    call = {"id": "refused_1", "type": "function", "function": {"name": "launch_rockets", "arguments": '{"count": 3}'}}
    assert added[0] == {"role": "assistant", "content": content, "tool_calls": [call]}
    assert added[1]["tool_call_id"] == "refused_1"
    assert added[1]["content"].startswith(
        '<error tool="launch_rockets">\nYour answer could not be used: holo4: unknown'
    )
    assert "Nothing was done. Answer again: call exactly one of the declared tools." in added[1]["content"]
    written = json.dumps(added)
    assert "tool_call>" not in written and "\\u003c" not in written and "secret plan" not in written


def test_each_of_two_refused_calls_goes_back_with_its_answer() -> None:
    profile = Holo4Profile()
    request = profile.navigation_request("task", [], images(profile, 1))
    from holodesk.inference.remote.answers import answer_text
    from holodesk.inference.tool_call_text import ToolCallPiece

    calls = [ToolCallPiece("click_desktop", '{"x": 1, "y": 2}'), ToolCallPiece("write_desktop", '{"content": "<b>"}')]
    retry = profile.retry_request(request, answer_text(REASONING, "", calls), "the answer holds 2 actions")
    assistant, *answers = retry.messages[len(request.messages) :]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        ("click_desktop", '{"x": 1, "y": 2}'),
        ("write_desktop", '{"content": "<b>"}'),
    ]
    assert assistant["content"] == ""
    assert [(m["role"], m["tool_call_id"]) for m in answers] == [("tool", "refused_1"), ("tool", "refused_2")]
    assert all("the answer holds 2 actions" in m["content"] for m in answers)


def test_a_refused_call_whose_arguments_are_not_json_is_left_out_and_the_words_say_so() -> None:
    """It cannot be a function call (vLLM hands the template its arguments as a mapping)."""
    profile = Holo4Profile()
    request = profile.navigation_request("task", [], images(profile, 1))
    refused = native_answer("click_desktop", '{"x": 120, "y"')
    error = "holo4: the arguments of click_desktop must be exactly one JSON object"
    added = profile.retry_request(request, refused, error).messages[len(request.messages) :]
    assert added[0] == {"role": "assistant", "content": "(a tool call, left out)"}
    [feedback] = added[1]["content"]
    assert added[1]["role"] == "user"
    assert feedback["text"] == (
        f'<error tool="tool_call">\nYour answer could not be used: {error}\n'
        "(Your call to click_desktop is not shown above: its arguments were not one JSON object.)\n"
        "Nothing was done. Answer again: call exactly one of the declared tools.\n</error>"
    )


def test_a_parsed_step_goes_back_without_reasoning() -> None:
    """The whole loop without a server: parse, remember as a PastStep, ask again; the reasoning is gone."""
    profile = Holo4Profile()
    step = profile.parse_navigation(native_answer("click_desktop", '{"element": "Inbox", "x": 1, "y": 2}'))
    past = PastStep(step.action, note=step.note, thought=step.thought, element=step.element)
    request = profile.navigation_request("task", [past], images(profile, 2))
    assert "secret plan" not in json.dumps(request.messages)
