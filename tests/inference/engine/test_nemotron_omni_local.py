"""The local backend runs Holotron-3-Nano (Nemotron-3-Nano-Omni) checkpoints with Holotron's engine, by architecture.

- A scripted checkpoint with the real layer pattern (Mamba-2, experts, attention: bench/nemotron_omni_tiny)
  that reasons, closes its reasoning and writes the holo-nano step: `LocalBackend` and `ModelPolicy`
  with the holotron3-nano profile propose the click the served model proposes through vLLM's
  `nemotron_v3` reasoning parser (tests/vllm/test_holotron3_nano_on_vllm.py, the same script): the
  same action, element and thought, the reasoning set aside by the profile's parser, not the thought.
- `build_policy` pairs the holotron3-nano profile with the local backend on such a checkpoint.
- A checkpoint of another family than the profile's is refused in words before any weight is read,
  both ways (Holotron-3-Nano with the holotron profile, Holotron-12B with holotron3-nano).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench.nemotron_omni_tiny import Variant, build_nemotron_omni_tiny
from holodesk.app.common.policy_factory import PolicyOptions, build_policy
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ModelLoadError
from holodesk.inference.local import LocalBackend
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.holotron3_nano import Holotron3NanoProfile
from tests.vllm.test_holotron3_nano_on_vllm import CLICK_SCRIPT, REASONING, TASK, THOUGHT


@pytest.fixture(scope="module")
def clicking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The default pattern "MEM*E": the experts run in process (the vLLM tier's server needs the dense one).
    variant = Variant(name="nano_click_moe", script=CLICK_SCRIPT)
    return build_nemotron_omni_tiny(tmp_path_factory.mktemp("omni-local") / "click", dtype="float32", variant=variant)


def screen(seed: int) -> ScreenFrame:
    pixels = np.random.default_rng(seed).integers(0, 256, (400, 640, 4), dtype=np.uint8)
    return ScreenFrame(pixels=pixels, region=Rect(0, 0, 640, 400), monitor=None, monitors=(), captured_at=0.0)


def test_the_in_process_step_is_the_served_click_with_the_reasoning_set_aside(clicking: Path) -> None:
    backend = LocalBackend(clicking, device="cpu", dtype="float32", profile="holotron3-nano")
    backend.load()
    try:
        steps = ModelPolicy(Holotron3NanoProfile(), backend)
        first = steps.propose(TASK, [], [screen(1)])
        # What test_holotron3_nano_on_vllm.py's served step proposes from the same script.
        assert first.action == Click(Point(120, 340))
        assert (first.element, first.thought, first.note) == ("Inbox folder", THOUGHT, "")
        assert not first.rejected and REASONING not in first.thought
        past = PastStep(first.action, note=first.note, thought=first.thought, element=first.element)
        second = backend.generate_detailed(
            Holotron3NanoProfile().navigation_request(
                TASK, [past], [Holotron3NanoProfile().prepare_image(f) for f in (screen(1), screen(2))]
            )
        )
        assert second.reused_tokens > 0  # the state kept from the first step
        assert second.text.startswith(REASONING)  # the raw text: the reasoning, then the step
    finally:
        backend.unload()


def test_the_holotron3_nano_profile_gets_the_local_backend(clicking: Path) -> None:
    options = PolicyOptions(
        backend="local",
        profile="holotron3-nano",
        model=str(clicking),
        base_url=None,
        device="cpu",
        script=None,
        screenshot_window="trained",
    )
    policy = build_policy(options)
    assert isinstance(policy.backend, LocalBackend) and policy.backend.is_loaded
    assert policy.backend.engine.spec.is_omni
    policy.backend.unload()


def test_a_holotron3_nano_checkpoint_with_the_holotron_profile_is_refused_before_loading(clicking: Path) -> None:
    stages: list[str] = []
    local = LocalBackend(clicking, device="cpu", profile="holotron")
    error = local.load_async(lambda s: stages.append(s.stage)).exception(timeout=60)
    assert isinstance(error, ModelLoadError)
    said = str(error)
    assert "is a Holotron-3-Nano (Nemotron-3-Nano-Omni) checkpoint: the in-process engine runs it with the" in said
    assert "holotron3-nano profile, not holotron; choose that profile" in said
    assert stages == ["locating", "checking"]


def test_a_holotron_checkpoint_with_the_holotron3_nano_profile_is_refused_before_loading(
    tiny_checkpoint: Path,
) -> None:
    stages: list[str] = []
    local = LocalBackend(tiny_checkpoint, device="cpu", profile="holotron3-nano")
    error = local.load_async(lambda s: stages.append(s.stage)).exception(timeout=60)
    assert isinstance(error, ModelLoadError)
    said = str(error)
    assert "Holotron-12B (Nemotron-Nano-VL-v2) checkpoint: the in-process engine runs it with the holotron" in said
    assert "not holotron3-nano" in said
    assert stages == ["locating", "checking"]
