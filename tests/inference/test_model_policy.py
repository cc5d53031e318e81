"""ModelPolicy: a profile and a backend as one Policy; frames are prepared once across steps; an
unusable answer goes back to the model once, through a real backend path, and never executes."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bench.rigs.fake_openai_server import DEFAULT_MODEL, Completion, FakeOpenAIServer
from holodesk.automation.actions import Click, Drag, Move, Point, Wait
from holodesk.automation.coords import NormalizedSpace
from holodesk.automation.engine_protocols import ApprovalDecision, Outcome
from holodesk.automation.trajectory import read_session
from holodesk.inference.errors import ParseError
from holodesk.inference.model_policy import ModelPolicy, pointer_after
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles import get_profile
from holodesk.inference.remote import RemoteBackend, RetryPolicy
from holodesk.inference.scripted import ScriptedBackend
from tests.automation.frames import solid_frame
from tests.automation.test_engine import ScriptedApprover, make_engine

CLICK = json.dumps({"note": "", "thought": "t", "action": {"name": "click_desktop", "x": 500, "y": 500}})
HARNESS_CLICK = json.dumps(
    {
        "note": None,
        "thought": "The OK button closes the dialog.",
        "tool_call": {"tool_name": "click_desktop", "element": "OK button of the dialog", "x": 400, "y": 600},
    }
)
# Broken outer object: its inner tool call must not be taken for the answer.
BROKEN = '{"note": null, "thought": "t", "tool_call": {"tool_name": "click_desktop", "element": "e", "x": 1, "y": 2}'


class CountingProfile:
    """The holotron profile, counting how often it prepares an image."""

    def __init__(self) -> None:
        self.inner = get_profile("holotron")
        self.prepared = 0

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def prepare_image(self, frame):
        self.prepared += 1
        return self.inner.prepare_image(frame)


class ShortAnswers(CountingProfile):
    """The holotron profile with a small token budget, so a tiny CPU model answers in moments."""

    def navigation_request(self, task, history, images):
        return replace(self.inner.navigation_request(task, history, images), max_new_tokens=4)


def test_a_proposal_is_the_parsed_action_in_model_space_with_its_image_size():
    policy = ModelPolicy(get_profile("holotron"), ScriptedBackend([CLICK]))
    proposal = policy.propose("t", [], [solid_frame(320, 200)])
    assert proposal.action == Click(Point(500, 500))
    assert (proposal.image_width, proposal.image_height) == (320, 200)
    assert proposal.space == NormalizedSpace()
    assert proposal.raw_text == CLICK


def test_each_frame_is_prepared_once_while_it_stays_in_the_window():
    profile = CountingProfile()
    backend = ScriptedBackend([CLICK] * 4)
    policy = ModelPolicy(profile, backend)
    frames = [solid_frame(64, 48, (i * 40, 0, 0)) for i in range(4)]
    done = [PastStep(Wait())] * 3  # one earlier step per screenshot after the first
    policy.propose("t", [], frames[:1])
    policy.propose("t", done[:1], frames[:2])
    policy.propose("t", done[:2], frames[:3])
    policy.propose("t", done[:3], frames[1:4])  # frame 0 left the window
    assert profile.prepared == 4
    # The backend got the very same image objects again (so it can reuse their encoding too).
    assert backend.requests[2].images[1] is backend.requests[1].images[1]
    assert backend.requests[3].images[0] is backend.requests[2].images[1]


def test_a_frame_prepared_ahead_is_not_prepared_again():
    profile = CountingProfile()
    backend = ScriptedBackend([CLICK] * 2)
    policy = ModelPolicy(profile, backend)
    first, settled, other = (solid_frame(64, 48, (i * 40, 0, 0)) for i in range(3))
    policy.propose("t", [], [first])
    policy.prepare_ahead(other)  # a candidate that did not turn out to be the settled screen
    policy.prepare_ahead(settled)
    assert profile.prepared == 3
    policy.propose("t", [PastStep(Wait())], [first, settled])
    assert profile.prepared == 3  # both frames were ready: nothing prepared in propose
    assert backend.requests[1].images[0] is backend.requests[0].images[0]


def test_an_engine_run_prepares_each_settled_screen_while_it_settles_not_in_propose(tmp_path):
    profile = CountingProfile()
    policy = ModelPolicy(
        profile,
        ScriptedBackend(
            [CLICK, CLICK, json.dumps({"note": "", "thought": "t", "action": {"name": "answer", "content": "ok"}})]
        ),
    )
    engine, _, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    seen: list[int] = []
    real_propose = policy.propose

    def propose(task, history, frames, cancel=None):  # type: ignore[no-untyped-def]
        seen.append(profile.prepared)
        return real_propose(task, history, frames, cancel)

    policy.propose = propose  # type: ignore[method-assign]
    result = engine.run("t")
    assert result.outcome is Outcome.DONE, result.detail
    # Before steps 2 and 3 the settled screen had already been prepared (while the screen settled):
    # the counts seen on entering propose grow with the steps, not only inside propose.
    assert seen[1] >= 2 and seen[2] >= 3
    assert profile.prepared == seen[2]  # the last propose prepared nothing itself


def test_an_answer_unusable_twice_keeps_its_text_and_timings():
    backend = ScriptedBackend(["no idea", "still no idea"])
    policy = ModelPolicy(get_profile("holotron"), backend)
    with pytest.raises(ParseError) as caught:
        policy.propose("t", [], [solid_frame()])
    assert caught.value.raw_text == "still no idea"
    assert "contains no JSON object (and before that: holotron: the answer contains no JSON" in str(caught.value)
    assert caught.value.timings is not None and caught.value.timings.tokens_out == 5  # both answers counted
    assert backend.remaining == 0 and len(backend.requests) == 2  # asked again exactly once


def test_an_unusable_answer_is_sent_back_and_the_second_answer_is_proposed():
    backend = ScriptedBackend([BROKEN, HARNESS_CLICK])
    policy = ModelPolicy(get_profile("holotron"), backend)
    proposal = policy.propose("close the dialog", [], [solid_frame()])
    assert proposal.action == Click(Point(400, 600))
    assert proposal.element == "OK button of the dialog"
    assert proposal.raw_text == HARNESS_CLICK
    (rejected,) = proposal.rejected
    assert rejected.raw_text == BROKEN and "no JSON object" in rejected.error
    first, second = backend.requests
    assert second.messages[: len(first.messages)] == first.messages and second.images == first.images
    assert second.messages[-2] == {"role": "assistant", "content": BROKEN}
    assert (
        "Your answer could not be used: holotron: the answer contains no JSON"
        in second.messages[-1]["content"][0]["text"]
    )


def test_drag_to_desktop_starts_where_the_last_step_left_the_pointer():
    drag = json.dumps(
        {
            "note": None,
            "thought": "t",
            "tool_call": {"tool_name": "drag_to_desktop", "element": "bin", "x": 900, "y": 100},
        }
    )
    history = [PastStep(Move(Point(120, 340)), element="file icon"), PastStep(Wait())]
    proposal = ModelPolicy(get_profile("holotron"), ScriptedBackend([drag])).propose("t", history, [solid_frame()] * 3)
    assert proposal.action == Drag(Point(120, 340), Point(900, 100))
    # with no step that put the pointer anywhere, the model is told to move first, then answers again
    backend = ScriptedBackend([drag, HARNESS_CLICK])
    proposal = ModelPolicy(get_profile("holotron"), backend).propose("t", [], [solid_frame()])
    assert "call move_to_desktop first" in proposal.rejected[0].error
    assert proposal.action == Click(Point(400, 600))


def test_the_pointer_is_where_the_last_performed_action_left_it():
    assert pointer_after([]) is None
    assert pointer_after([PastStep(Drag(Point(1, 2), Point(3, 4))), PastStep(Wait())]) == Point(3, 4)
    skipped = PastStep(Click(Point(9, 9)), performed=False)
    assert pointer_after([PastStep(Move(Point(5, 6))), skipped]) == Point(5, 6)


def test_the_retry_goes_over_http_to_a_real_server():
    """The loopback stand-in for vLLM receives both requests: the second carries the refused answer
    and the error in roles system/user/assistant, the same screenshot, and the step schema."""
    with FakeOpenAIServer() as server:
        server.queue(Completion(text="I would click OK."), Completion(text=HARNESS_CLICK))
        backend = RemoteBackend(
            server.base_url,
            model=DEFAULT_MODEL,
            api_key="",
            read_timeout_s=5.0,
            retry=RetryPolicy(max_attempts=1),
        )
        proposal = ModelPolicy(get_profile("holotron"), backend).propose("close it", [], [solid_frame(320, 200)])
        assert proposal.action == Click(Point(400, 600)) and proposal.element == "OK button of the dialog"
        assert server.problems == []
        first, second = server.chat_requests
    assert [m["role"] for m in second.body["messages"]] == ["system", "user", "assistant", "user"]
    assert second.body["messages"][2]["content"] == "I would click OK."
    assert "could not be used" in json.dumps(second.body["messages"][3])
    assert len(second.images()) == len(first.images()) == 1
    schema = second.body["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["note", "thought", "tool_call"]
    assert second.body["messages"][0]["content"].startswith("/no_think\n")


def test_nothing_executes_from_an_answer_unusable_twice(tmp_path):
    policy = ModelPolicy(get_profile("holotron"), ScriptedBackend([BROKEN, "click OK"]))
    engine, performer, _ = make_engine(policy, ScriptedApprover(), tmp_path=tmp_path)
    result = engine.run("close the dialog")
    assert result.outcome is Outcome.ERROR and "unusable" in result.detail
    assert performer.executed == []
    (step,) = read_session(result.folder).steps
    assert step["raw_text"] == "click OK" and "before that" in step["error"]


def test_a_step_saved_by_the_retry_runs_and_records_both_answers(tmp_path):
    finish = json.dumps({"note": None, "thought": "done", "tool_call": {"tool_name": "answer", "content": "closed"}})
    backend = ScriptedBackend(["I would click OK.", HARNESS_CLICK, finish])
    policy = ModelPolicy(get_profile("holotron"), backend)
    engine, performer, _ = make_engine(policy, ScriptedApprover(ApprovalDecision.approve()), tmp_path=tmp_path)
    result = engine.run("close the dialog")
    assert (result.outcome, result.detail) == (Outcome.DONE, "closed")
    assert len(performer.executed) == 1 and isinstance(performer.executed[0], Click)
    first = read_session(result.folder).steps[0]
    assert first["element"] == "OK button of the dialog"
    assert first["rejected_answers"][0]["raw_text"] == "I would click OK."
    # the next request holds the executed step as the harness writes it
    later = backend.requests[2].messages
    assert json.loads(later[2]["content"])["tool_call"]["element"] == "OK button of the dialog"


def test_the_harness_conversation_runs_through_the_in_process_backend(tiny_backend):  # type: ignore[no-untyped-def]
    """Multi-turn messages (assistant turns, tool outputs, placeholders, three screenshots) render through
    the tiny checkpoint's chat template and processor, twice (the answer and the retry). Its random
    answers are refused both times, so nothing is proposed."""
    history = [
        PastStep(Move(Point(120, 340)), note="3 unread", thought="hover", element="first row"),
        PastStep(Click(Point(500, 500)), outcome="skipped by the user: the action was not performed", performed=False),
        PastStep(Wait()),
    ]
    frames = [solid_frame(320, 200, (i * 60, 90, 120)) for i in range(4)]
    policy = ModelPolicy(ShortAnswers(), tiny_backend)
    with pytest.raises(ParseError) as caught:
        policy.propose("archive the newsletters", history, frames)
    assert "(and before that:" in str(caught.value)  # both requests were generated and parsed
    timings = caught.value.timings
    assert timings.tokens_in > 2 * 3 * 256  # both requests carried three screenshots of >= 256 tokens each
    assert timings.tokens_out <= 2 * 4
