"""The holotron3-nano profile (Holotron-3-Nano): its request, its parser, its coordinates, without a server.

The same profile runs against a real vLLM with the real `nemotron_v3` reasoning parser in
tests/vllm/test_holotron3_nano_on_vllm.py; here, what the request holds and what the parser makes of
each shape of answer (the remote backend hands reasoning over as a `<think>` block in front of it).
"""

from __future__ import annotations

import json

import pytest

from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import NormalizedSpace
from holodesk.inference.errors import ParseError
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.holotron import IMAGE_PLACEHOLDER, navigation_schema
from holodesk.inference.profiles.holotron3_nano import Holotron3NanoProfile
from holodesk.inference.remote.answers import answer_text
from tests.inference.profiles.test_registry import frame

REASONING = "The secret plan is to click the inbox."
STEP = {
    "note": None,
    "thought": "Open the inbox.",
    "tool_call": {"tool_name": "click_desktop", "element": "Inbox folder", "x": 120, "y": 340},
}


def history(count: int) -> list[PastStep]:
    return [
        PastStep(Click(Point(100 * n, 200)), thought=f"thought {n}", element=f"button {n}") for n in range(1, count + 1)
    ]


@pytest.mark.parametrize("name", ["holotron3-nano", "Holotron-3-Nano", "holotron_3_nano"])
def test_the_names_reach_the_profile(name: str) -> None:
    profile = get_profile(name)
    assert type(profile) is Holotron3NanoProfile
    assert profile.space == NormalizedSpace(1000)
    assert profile.runs_in_process  # vLLM serves it, or the in-process engine (Holotron-12B's) runs it


def test_the_vllm_command_is_the_cookbook_one_with_the_image_limit() -> None:
    command = Holotron3NanoProfile.vllm_command("Hcompany/Holotron-3-Nano")
    assert command == (
        "vllm serve Hcompany/Holotron-3-Nano --trust-remote-code --reasoning-parser nemotron_v3"
        ' --limit-mm-per-prompt \'{"image": 3, "video": 0, "audio": 0}\''
    )
    assert "--tool-call-parser" not in command  # the step is JSON in the text, not a tool call


def test_the_request_asks_for_the_schema_with_reasoning_on_and_the_last_three_screenshots() -> None:
    profile = Holotron3NanoProfile()
    shots = [profile.prepare_image(frame(1920, 1080)) for _ in range(5)]
    request = profile.navigation_request("Open the inbox.", history(4), shots)
    assert request.response_schema == navigation_schema()
    assert request.tools == () and request.tool_choice is None
    assert request.chat_template_kwargs == {"enable_thinking": True}
    assert request.max_new_tokens == 4096
    # Sent at full size: the server's tiler takes a 1920x1080 screenshot whole (8,100 16-px patches).
    assert [image.size for image in request.images] == [(1920, 1080)] * 3
    text = json.dumps(request.messages)
    assert text.count(IMAGE_PLACEHOLDER) == 2  # the two oldest of five observations
    system = request.messages[0]["content"]
    assert "<output_format>" in system and json.dumps(navigation_schema(), ensure_ascii=False) in system
    assert "/think" not in system  # Holotron-12B's switch; this model's is enable_thinking


def test_localization_turns_reasoning_off() -> None:
    profile = Holotron3NanoProfile()
    request = profile.localization_request("the blue button", profile.prepare_image(frame()))
    assert request.chat_template_kwargs == {"enable_thinking": False}
    assert profile.parse_localization('{"x": 500, "y": 250}') == Point(500, 250)


def test_the_step_after_reasoning_becomes_the_action_and_the_reasoning_never_goes_back() -> None:
    profile = Holotron3NanoProfile()
    step = profile.parse_navigation(answer_text(REASONING, json.dumps(STEP), []))
    assert step.action == Click(Point(120, 340))
    assert (step.thought, step.element, step.note) == ("Open the inbox.", "Inbox folder", "")
    past = PastStep(step.action, note=step.note, thought=step.thought, element=step.element)
    shot = profile.prepare_image(frame(640, 400))
    following = profile.navigation_request("Open the inbox.", [past], [shot, shot])
    assert REASONING not in json.dumps(following.messages)
    [assistant] = [message for message in following.messages if message["role"] == "assistant"]
    assert json.loads(assistant["content"])["tool_call"] == STEP["tool_call"]  # the parsed step, not the raw text


def test_the_point_reaches_the_screen_through_the_coordinate_module() -> None:
    profile = Holotron3NanoProfile()
    mapping = profile.prepare_image(frame(640, 400)).mapping
    assert mapping.model_to_screen(Point(120, 340), profile.space) == Point(76, 136)


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (answer_text(REASONING, "", []), "the answer holds only reasoning, no action"),
        ("<think>I keep thinking", "holotron3-nano: "),
        (json.dumps({**STEP, "tool_call": {"tool_name": "click_desktop", "x": 120}}), "click_desktop needs 'y'"),
        (json.dumps({**STEP, "tool_call": {"tool_name": "key_down_desktop", "key": "shift"}}), "not supported"),
    ],
    ids=["only-reasoning", "cut-in-reasoning", "missing-y", "held-key"],
)
def test_a_malformed_answer_is_refused_in_words(answer: str, said: str) -> None:
    with pytest.raises(ParseError) as caught:
        Holotron3NanoProfile().parse_navigation(answer)
    assert said in str(caught.value) and str(caught.value).startswith("holotron3-nano: ")
    assert REASONING not in str(caught.value)


def test_a_retry_sends_the_refused_answer_back_without_its_reasoning() -> None:
    profile = Holotron3NanoProfile()
    request = profile.navigation_request("Open the inbox.", [], [profile.prepare_image(frame())])
    refused = answer_text(REASONING, '{"note": null}', [])
    retry = profile.retry_request(request, refused, "the step has no tool_call")
    sent = json.dumps(retry.messages[-2:])
    assert "the step has no tool_call" in sent and "Nothing was done" in sent
    assert REASONING not in sent


def test_native_tool_calls_are_refused_in_words() -> None:
    with pytest.raises(ValueError, match="holotron3-nano does not answer with native tool calls"):
        Holotron3NanoProfile(native_tools=True)
