"""doctor on a Qwen3.5 checkpoint (Holo3, Holo3.1, Holo4) for the in-process engine: its memory plan
before loading, the profile it needs, and with --try one step proposed through that profile."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.qwen35_tiny import build_qwen35_tiny
from holodesk.app.cli.doctor_model import check_model
from holodesk.app.cli.doctor_report import CheckResult, DoctorOptions


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint that reasons one sentence, then calls click_desktop on the Inbox (Qwen's XML form)."""
    return build_qwen35_tiny(tmp_path_factory.mktemp("doctor-qwen35") / "scripted", dtype="float32", variant="scripted")


def checks(checkpoint: Path, profile: str, *, try_step: bool = False) -> dict[str, CheckResult]:
    options = DoctorOptions("local", str(checkpoint), None, "cpu", try_step=try_step, profile=profile)
    return {result.name: result for result in check_model(options)}


def test_the_plan_comes_before_loading_and_a_step_is_proposed_through_the_profile(scripted: Path) -> None:
    found = checks(scripted, "holo4", try_step=True)
    assert found["weights"].status.value == "OK" and "Qwen3.5 checkpoint" in found["weights"].detail
    plan = found["load plan"]
    assert plan.status.value == "OK" and "cache for 16,384 tokens" in plan.detail, plan.detail
    step = found["try"]
    assert step.status.value == "OK", step.detail
    # The scripted call (click_desktop at x=120, y=340 of 0-1000) made into the action.
    assert "in-process engine" in step.detail and step.detail.endswith("proposed: click at (120, 340)")


def test_a_profile_that_does_not_speak_the_format_is_refused_before_loading(scripted: Path) -> None:
    found = checks(scripted, "holotron", try_step=True)
    assert found["profile"].status.value == "FAIL" and found["profile"].blocking
    assert "holo3.1" in found["profile"].fix and "try" not in found


def test_a_plan_larger_than_the_free_memory_blocks_before_loading(
    scripted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import holodesk.inference.engine.placement

    monkeypatch.setattr(holodesk.inference.engine.placement, "available_memory_bytes", lambda: 1 << 20)
    found = checks(scripted, "holo3.1", try_step=True)
    plan = found["load plan"]
    assert plan.status.value == "FAIL" and plan.blocking and "but this machine's memory has" in plan.detail
    assert "try" not in found


def test_a_gpu_that_is_not_there_blocks_before_loading(scripted: Path) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    options = DoctorOptions("local", str(scripted), None, "cuda", try_step=True, profile="holo3.1")
    found = {result.name: result for result in check_model(options)}
    assert found["load plan"].status.value == "FAIL" and "There is no cuda:0" in found["load plan"].detail
    assert "try" not in found
