"""ModelPolicy: a profile and a backend as one Policy; frames are prepared once across steps."""

from __future__ import annotations

import json

import pytest

from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import NormalizedSpace
from holodesk.inference.errors import ParseError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.scripted import ScriptedBackend
from tests.automation.frames import solid_frame

CLICK = json.dumps({"note": "", "thought": "t", "action": {"name": "click_desktop", "x": 500, "y": 500}})


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
    policy.propose("t", [], frames[:1])
    policy.propose("t", [], frames[:2])
    policy.propose("t", [], frames[:3])
    policy.propose("t", [], frames[1:4])  # frame 0 left the window
    assert profile.prepared == 4
    # The backend got the very same image objects again (so it can reuse their encoding too).
    assert backend.requests[2].images[1] is backend.requests[1].images[1]
    assert backend.requests[3].images[0] is backend.requests[2].images[1]


def test_an_unusable_answer_keeps_its_text_and_timings():
    policy = ModelPolicy(get_profile("holotron"), ScriptedBackend(["no idea"]))
    with pytest.raises(ParseError) as caught:
        policy.propose("t", [], [solid_frame()])
    assert caught.value.raw_text == "no idea"
    assert caught.value.timings is not None
