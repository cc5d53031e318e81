"""build_policy for the local backend: the engine loaded with progress, and the screenshot window it shows."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from holodesk.app.common.policy_factory import PolicyConfigError, PolicyOptions, build_policy
from holodesk.inference.local import LocalBackend
from holodesk.inference.profiles import get_profile


def _options(checkpoint: Path, window: str) -> PolicyOptions:
    return PolicyOptions(
        backend="local",
        profile="holotron",
        model=str(checkpoint),
        base_url=None,
        device="cpu",
        script=None,
        screenshot_window=window,
    )


def test_the_local_policy_shows_the_trained_window_and_is_loaded_with_progress(tiny_checkpoint: Path) -> None:
    seen: list[tuple[float, str]] = []
    policy = build_policy(
        _options(tiny_checkpoint, "trained"), lambda fraction, message: seen.append((fraction, message))
    )
    backend = policy.backend
    assert isinstance(backend, LocalBackend) and backend.is_loaded
    # The same window as the remote backend's: the last 3 screenshots, sliding one a step.
    assert policy.profile.budget == get_profile("holotron").budget
    assert policy.profile.budget.drop_block == 1
    assert seen[0][0] == 0.0 and seen[-1][0] == 1.0 and "Model ready on cpu" in seen[-1][1]
    backend.unload()


def test_the_block_window_is_an_option(tiny_checkpoint: Path) -> None:
    policy = build_policy(_options(tiny_checkpoint, "block"))
    default = get_profile("holotron").budget
    assert policy.profile.budget.keep_screenshots == default.keep_screenshots
    assert policy.profile.budget.drop_block == default.keep_screenshots
    assert isinstance(policy.backend, LocalBackend)
    policy.backend.unload()


@pytest.mark.parametrize("profile", ["holo1.5", "holo1"])
def test_a_profile_the_engine_cannot_run_is_refused_before_any_weight_is_read(tmp_path: Path, profile: str) -> None:
    """The engine runs Holotron's, Holotron-3-Nano's and Qwen3.5's families only: another family's prompts would
    reach it unnoticed."""
    options = dataclasses.replace(_options(tmp_path / "no-checkpoint-here", "trained"), profile=profile)
    with pytest.raises(PolicyConfigError, match=f"the {re.escape(profile)} profile cannot run in the in-process"):
        build_policy(options)
