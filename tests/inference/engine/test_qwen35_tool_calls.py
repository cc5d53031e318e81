"""Native tool calls in process: the holo4 and holo3.1-tools steps the vLLM tier proves, without a server.

The scripted Qwen3.5 checkpoints of tests/vllm/test_holo_on_vllm.py (bench/qwen35_tiny's bigram
chain: whatever it is shown, it reasons, writes `{note, thought}` and calls click_desktop in Qwen3.5's
XML form, or leaves out y) run here through the local backend and `ModelPolicy`, as `holodesk run
--backend local` would. There vLLM's qwen3_coder parser turns the XML into `tool_calls`; here
`engine.qwen_tool_calls` does, and the step must be the same: the click at (120, 340) on "Inbox
folder" with the thought and without the reasoning, and for the malformed call the same refusal in
words after one retry. The rewriting itself is checked on texts with typed and untyped parameters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.qwen35_tiny import Variant, build_qwen35_tiny
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.qwen_tool_calls import parsed_tool_calls
from holodesk.inference.errors import ParseError
from holodesk.inference.local import LocalBackend
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.holo3 import Holo4Profile, Holo31Profile, HoloAgentProfile, function_tools
from tests.support.qwen35_scripts import BROKEN_SCRIPT, CLICK_SCRIPT, THOUGHT

TASK = "Open the inbox."


def _backend(folder: Path, name: str, script: tuple[str, ...], profile: str) -> Iterator[LocalBackend]:
    checkpoint = build_qwen35_tiny(folder / name, dtype="float32", variant=Variant(name=name, script=script))
    backend = LocalBackend(checkpoint, device="cpu", dtype="float32", profile=profile)
    backend.load()
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def clicking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBackend]:
    yield from _backend(tmp_path_factory.mktemp("holo-click"), "holo_click", CLICK_SCRIPT, "holo4")


def screen(seed: int) -> ScreenFrame:
    pixels = np.random.default_rng(seed).integers(0, 256, (400, 640, 4), dtype=np.uint8)
    return ScreenFrame(pixels, Rect(0, 0, 640, 400), None, (), captured_at=0.0)


@pytest.mark.parametrize("profile", [Holo4Profile(), Holo31Profile(native_tools=True)], ids=["holo4", "holo3.1-tools"])
def test_the_tool_call_becomes_the_click_as_behind_vllm(clicking: LocalBackend, profile: HoloAgentProfile) -> None:
    clicking.forget()
    steps = ModelPolicy(profile, clicking)
    proposal = steps.propose(TASK, [], [screen(1)])
    assert proposal.action == Click(Point(120, 340))
    assert (proposal.element, proposal.thought, proposal.note) == ("Inbox folder", THOUGHT, "")
    assert not proposal.rejected
    past = PastStep(proposal.action, note=proposal.note, thought=proposal.thought, element=proposal.element)
    second = steps.propose(TASK, [past], [screen(1), screen(2)])
    assert second.action == Click(Point(120, 340)) and not second.rejected


def test_a_malformed_tool_call_is_refused_in_the_same_words(tmp_path: Path) -> None:
    for backend in _backend(tmp_path, "holo_broken", BROKEN_SCRIPT, "holo4"):
        with pytest.raises(ParseError) as caught:
            ModelPolicy(Holo4Profile(), backend).propose(TASK, [], [screen(0)])
        said = str(caught.value)
        assert "holo4: click_desktop needs 'y'" in said
        assert "(and before that: holo4: click_desktop needs 'y')" in said


def test_parameters_are_typed_by_the_declared_schema_and_other_text_is_kept() -> None:
    tools = list(function_tools())
    text = (
        "plan</think>\n\n{}"
        "<tool_call>\n<function=click_desktop>\n<parameter=x>\n7\n</parameter>\n<parameter=element>\n"
        "042\n</parameter>\n</function>\n</tool_call>"
        "<tool_call>\n<function=write_desktop>\n<parameter=content>\na <b>\nc\n</parameter>\n</function>\n</tool_call>"
    )
    rewritten = parsed_tool_calls(text, tools)
    assert rewritten.startswith("plan</think>\n\n{}<tool_call>{")
    blocks = [
        json.loads(b.split("</tool_call>")[0].replace("\\u003c", "<")) for b in rewritten.split("<tool_call>")[1:]
    ]
    assert [b["function"]["name"] for b in blocks] == ["click_desktop", "write_desktop"]
    # x is an integer in the schema, element a string (leading zero kept); one newline each side is the format's.
    assert json.loads(blocks[0]["function"]["arguments"]) == {"x": 7, "element": "042"}
    assert json.loads(blocks[1]["function"]["arguments"]) == {"content": "a <b>\nc"}
    # Nothing in an argument can close the block early: every "<" inside is escaped.
    assert "<b>" not in rewritten
    unfinished = "<tool_call>\n<function=click_desktop>\n<parameter=x>\n7\n</parameter>\n"
    assert parsed_tool_calls(unfinished, tools) == unfinished
