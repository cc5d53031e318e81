"""The local backend runs Qwen3.5 checkpoints (Holo3, Holo3.1, Holo4) with the family engine, by model_type.

On the tiny dense checkpoint of bench/qwen35_tiny (float32, the CPU): `LocalBackend` routes it to
`engine.qwen35` (the engine tests/inference/engine/test_qwen35_against_vllm.py proves against vLLM),
answers a holo3.1 step with the tokens that engine gives on its own, keeps the state to the next
step, and `build_policy` pairs the holo3.1 profile with it. A checkpoint of the other family than
the profile's is refused in words before any weight is read, both ways.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from bench.qwen35_tiny import build_qwen35_tiny
from holodesk.app.common.policy_factory import PolicyOptions, build_policy
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.qwen35 import Qwen35Engine
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.local import LocalBackend
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.holo3 import Holo31Profile
from tests.support.prefill_stop import assert_a_stop_lands_at_the_next_prefill_chunk

TOKENS = 6


@pytest.fixture(scope="module")
def qwen_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen35_tiny(tmp_path_factory.mktemp("qwen35-local") / "qwen35", dtype="float32")


@pytest.fixture(scope="module")
def backend(qwen_checkpoint: Path) -> Iterator[LocalBackend]:
    local = LocalBackend(qwen_checkpoint, device="cpu", dtype="float32", profile="holo3.1")
    local.load()
    yield local
    local.unload()


def _frame(seed: int) -> ScreenFrame:
    pixels = np.random.default_rng(seed).integers(0, 256, (400, 640, 4), dtype=np.uint8)
    return ScreenFrame(pixels=pixels, region=Rect(0, 0, 640, 400), monitor=None, monitors=(), captured_at=0.0)


def test_a_step_and_the_next_give_the_family_engines_tokens_with_the_state_kept(
    backend: LocalBackend, qwen_checkpoint: Path
) -> None:
    profile = Holo31Profile()
    fresh = Qwen35Engine(qwen_checkpoint, device="cpu", dtype="float32", reuse=False)
    shots = [profile.prepare_image(_frame(0))]
    history: list[PastStep] = []
    backend.forget()
    for step in range(2):
        request = dataclasses.replace(
            profile.navigation_request("Open the settings", history, shots), max_new_tokens=TOKENS
        )
        ours = backend.generate_detailed(request)
        alone = fresh.generate(request)
        assert ours.prompt_token_ids == alone.prompt_ids
        assert ours.new_token_ids == alone.new_ids
        assert ours.timings.tokens_reused == ours.reused_tokens
        if step == 0:
            assert ours.reused_tokens == 0
        else:  # resumed from the kept state: the turn of the screenshot still shown
            assert ours.reused_tokens > 0 and ours.prefilled_tokens < len(ours.prompt_token_ids)
        history.append(PastStep(Click(Point(100, 200)), thought="open it"))
        shots.append(profile.prepare_image(_frame(step + 1)))
    with pytest.raises(BackendError, match=r"Qwen3\.5 checkpoint: it has no Holotron engine"):
        _ = backend.engine


def test_the_holo31_profile_gets_the_local_backend_on_a_qwen_checkpoint(qwen_checkpoint: Path) -> None:
    options = PolicyOptions(
        backend="local",
        profile="holo3.1",
        model=str(qwen_checkpoint),
        base_url=None,
        device="cpu",
        script=None,
        screenshot_window="trained",
    )
    policy = build_policy(options)
    assert isinstance(policy.backend, LocalBackend) and policy.backend.is_loaded
    assert policy.profile.name == "holo3.1"
    policy.backend.unload()


def test_a_qwen_checkpoint_with_the_holotron_profile_is_refused_before_loading(qwen_checkpoint: Path) -> None:
    stages: list[str] = []
    local = LocalBackend(qwen_checkpoint, device="cpu", profile="holotron")
    error = local.load_async(lambda s: stages.append(s.stage)).exception(timeout=60)
    assert isinstance(error, ModelLoadError)
    said = str(error)
    assert "is a Qwen3.5 (Holo3, Holo3.1, Holo4) checkpoint: the in-process engine runs it with the holo3.1" in said
    assert "or holo3.1-tools profile, not holotron; choose that profile" in said
    assert stages == ["locating", "checking"]


def test_a_holotron_checkpoint_with_a_holo_profile_is_refused_before_loading(tiny_checkpoint: Path) -> None:
    stages: list[str] = []
    local = LocalBackend(tiny_checkpoint, device="cpu", profile="holo3.1")
    error = local.load_async(lambda s: stages.append(s.stage)).exception(timeout=60)
    assert isinstance(error, ModelLoadError)
    assert "Holotron-12B (Nemotron-Nano-VL-v2) checkpoint: the in-process engine runs it with the holotron" in str(
        error
    )
    assert stages == ["locating", "checking"]


def test_a_checkpoint_whose_plan_exceeds_the_free_memory_is_refused_before_loading(
    qwen_checkpoint: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import holodesk.inference.engine.placement
    from holodesk.inference.qwen35_memory import plan_checkpoint

    plan = plan_checkpoint(qwen_checkpoint, dtype="float32")
    room = plan.weights + plan.cache(16384) // 2  # the weights fit, the weights and the cache do not
    monkeypatch.setattr(holodesk.inference.engine.placement, "available_memory_bytes", lambda: room)
    local = LocalBackend(qwen_checkpoint, device="cpu", dtype="float32", profile="holo3.1")
    with pytest.raises(ModelLoadError, match=r"cache for 16,384 tokens .* free: use a smaller model"):
        local.load()
    assert local._runner is None


def test_a_stop_during_the_prefill_ends_it_at_the_next_chunk(qwen_checkpoint: Path) -> None:
    engine = Qwen35Engine(qwen_checkpoint, device="cpu", dtype="float32", reuse=True, prefill_chunk=64)
    profile = Holo31Profile()
    request = dataclasses.replace(
        profile.navigation_request("Open the settings", [], [profile.prepare_image(_frame(0))]), max_new_tokens=TOKENS
    )
    assert_a_stop_lands_at_the_next_prefill_chunk(engine, engine.model.model.language_model, request)
