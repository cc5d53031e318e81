"""The engine's own loop: kept state gives the same logits as a fresh prefill (appended to or with the screenshot
window moved on), stop tokens, streaming, cancel."""

from __future__ import annotations

import pytest
import torch

from holodesk.automation.actions import Click, Point
from holodesk.automation.screen import frame_from_image
from holodesk.inference.engine.kept_state import GenerationCancelled
from holodesk.inference.engine.runner import Engine
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest, ImageBudget
from holodesk.inference.profiles.holotron import HolotronProfile
from tests.support.agent_conversations import agent_conversation, random_screenshot
from tests.support.prefill_stop import assert_a_stop_lands_at_the_next_prefill_chunk

_screenshot = random_screenshot
_conversation = agent_conversation


def test_kept_state_prefills_only_what_was_appended_and_matches_a_fresh_prefill(engine: Engine) -> None:
    engine.forget()
    first = engine.generate(_conversation(1), top_logprobs=5)
    runs_after_first = engine.vision_runs
    second = engine.generate(_conversation(2), top_logprobs=5)
    # Only the new turn (the answer, the new screenshot, the generation prompt) was prefilled.
    assert second.reused_tokens > 0
    assert second.prefilled_tokens == len(second.prompt_ids) - second.reused_tokens
    assert second.reused_tokens >= len(first.prompt_ids) - 16
    # The step's timings say so too (what the benchmarks rate the prefill on).
    assert second.timings.tokens_reused == second.reused_tokens and first.timings.tokens_reused == 0
    # The first screenshot's features were computed once.
    assert engine.vision_runs == runs_after_first + 1
    engine.forget()
    fresh = engine.generate(_conversation(2), top_logprobs=5)
    assert fresh.reused_tokens == 0
    assert fresh.prompt_ids == second.prompt_ids
    assert fresh.new_ids == second.new_ids
    for kept, full in zip(second.top_logprobs, fresh.top_logprobs, strict=True):
        assert kept.keys() == full.keys()
        assert max(abs(kept[k] - full[k]) for k in kept) < 1e-4


def test_when_the_window_drops_a_screenshot_the_kept_turn_before_it_is_resumed(engine: Engine) -> None:
    """A sliding window turns the oldest screenshot into a placeholder each step: the engine resumes from the
    start of that screenshot's turn (kept from the step before) and its answer is a fresh prefill's."""
    profile = HolotronProfile(ImageBudget(keep_screenshots=2, drop_block=1))
    shots = [profile.prepare_image(frame_from_image(_screenshot(600, 400, seed))) for seed in range(4)]
    history = [PastStep(Click(Point(100 * n, 200)), note=f"step {n}", thought="next") for n in range(1, 4)]

    def step(number: int) -> ChatRequest:
        chat = profile.navigation_request("Archive the newsletter.", history[:number], shots[: number + 1])
        return ChatRequest(messages=chat.messages, images=chat.images, max_new_tokens=6)

    engine.forget()
    for number in range(3):
        engine.generate(step(number))
    moved = engine.generate(step(3), top_logprobs=5)  # the screenshot of step 2 became a placeholder
    user_turn = engine.tokenizer.convert_tokens_to_ids("<SPECIAL_11>")
    image_start = engine.tokenizer.convert_tokens_to_ids("<img>")
    first_image = moved.prompt_ids.index(image_start)
    turn = max(i for i, token in enumerate(moved.prompt_ids[:first_image]) if token == user_turn)
    # Resumed where the previous step's oldest screenshot's turn began (the user turn before the last assistant
    # turn): before the placeholder that replaced it.
    markers = [i for i, token in enumerate(moved.prompt_ids[:turn]) if token == user_turn]
    assert moved.reused_tokens == markers[-2]
    engine.forget()
    fresh = engine.generate(step(3), top_logprobs=5)
    assert fresh.reused_tokens == 0 and fresh.prompt_ids == moved.prompt_ids
    assert fresh.new_ids == moved.new_ids
    for kept, full in zip(moved.top_logprobs, fresh.top_logprobs, strict=True):
        assert kept.keys() == full.keys()
        assert max(abs(kept[k] - full[k]) for k in kept) < 1e-4


def test_a_changed_screenshot_is_not_mistaken_for_the_kept_one(engine: Engine) -> None:
    engine.forget()
    engine.generate(_conversation(2))
    request = _conversation(2)
    request.images[0] = _screenshot(600, 400, 99)  # same size, so the same ids: only the pixels differ
    changed = engine.generate(request)
    assert changed.reused_tokens < changed.prompt_ids.index(engine.spec.image_token_id)


def test_chunked_prefill_matches_one_pass(real_layout_checkpoint, engine: Engine) -> None:
    chunked = Engine(real_layout_checkpoint, dtype="float32", reuse=False, prefill_chunk=100)
    request = _conversation(1)
    engine.forget()
    whole = engine.generate(request, top_logprobs=5)
    parts = chunked.generate(request, top_logprobs=5)
    assert parts.new_ids == whole.new_ids
    for a, b in zip(parts.top_logprobs, whole.top_logprobs, strict=True):
        assert max(abs(a[k] - b[k]) for k in a) < 1e-4


def test_stops_on_the_checkpoints_end_of_turn_token(engine: Engine) -> None:
    engine.forget()
    request = _conversation(1)
    free = engine.generate(request)
    # Make the engine's first greedy token an end-of-turn token: it must stop there, with no text.
    stop = free.new_ids[0]
    saved = list(engine.stop_ids)
    engine.stop_ids = [stop]
    try:
        stopped = engine.generate(request)
    finally:
        engine.stop_ids = saved
    assert stopped.new_ids == (stop,)
    assert stopped.stopped_on == stop
    assert stopped.text == ""


def test_streams_each_token_and_cancels_between_tokens(engine: Engine) -> None:
    engine.forget()
    seen: list[int] = []
    result = engine.generate(_conversation(1), on_token=seen.append)
    assert seen == list(result.new_ids)
    with pytest.raises(GenerationCancelled):
        engine.generate(_conversation(1), on_token=seen.append, cancelled=lambda: len(seen) >= len(result.new_ids) + 3)
    assert len(seen) == len(result.new_ids) + 3


def test_the_stop_tokens_are_the_checkpoints(engine: Engine) -> None:
    assert engine.tokenizer.convert_tokens_to_ids("<SPECIAL_12>") in engine.stop_ids


def test_logits_come_from_the_last_position_only(engine: Engine) -> None:
    ids = torch.tensor([[engine.tokenizer.convert_tokens_to_ids("<s>")] * 40])
    out = engine.model.language_model(input_ids=ids, use_cache=False, logits_to_keep=1)
    assert out.logits.shape[1] == 1


def test_a_stop_during_the_prefill_ends_it_at_the_next_chunk(real_layout_checkpoint) -> None:  # type: ignore[no-untyped-def]
    chunked = Engine(real_layout_checkpoint, dtype="float32", reuse=True, prefill_chunk=100)
    assert_a_stop_lands_at_the_next_prefill_chunk(chunked, chunked.model.language_model, _conversation(1))
