"""build_policy for the local backend: the engine loaded with progress, the screenshot window that keeps its state."""

from __future__ import annotations

from pathlib import Path

from holodesk.app.common.policy_factory import PolicyOptions, build_policy
from holodesk.inference.local import LocalBackend
from holodesk.inference.profiles import get_profile


def test_the_local_policy_drops_screenshots_in_blocks_and_is_loaded_with_progress(tiny_checkpoint: Path) -> None:
    options = PolicyOptions(
        backend="local", profile="holotron", model=str(tiny_checkpoint), base_url=None, device="cpu", script=None
    )
    seen: list[tuple[float, str]] = []
    policy = build_policy(options, lambda fraction, message: seen.append((fraction, message)))
    backend = policy.backend
    assert isinstance(backend, LocalBackend) and backend.is_loaded
    default = get_profile("holotron").budget
    assert default.drop_block == 1  # the profile alone slides its window; the local backend's does not
    assert policy.profile.budget.keep_screenshots == default.keep_screenshots
    assert policy.profile.budget.drop_block == default.keep_screenshots
    assert seen[0][0] == 0.0 and seen[-1][0] == 1.0 and "Model ready on cpu" in seen[-1][1]
    backend.unload()
