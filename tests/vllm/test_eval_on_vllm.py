"""`holodesk eval miniwob` against the real vLLM: two episodes, every step's answer parsed (random weights)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.rigs.vllm_server import VllmServer
from holodesk.automation.trajectory import read_session
from holodesk.automation.virtual_display import DisplayLayout
from tests.vllm.test_commands_on_vllm import holodesk

pytestmark = [
    pytest.mark.vllm,
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1024, 768)], indirect=True, ids=str, scope="module"),
]


def test_two_miniwob_episodes_run_through_the_server(xvfb, vllm_server: VllmServer, tmp_path):
    results = tmp_path / "results.json"
    result = holodesk(
        "eval", "miniwob", "--tasks", "click-button", "--episodes", "2", "--max-steps", "1", "--zoom", "2",
        "--backend", "remote", "--base-url", vllm_server.base_url, "--json", str(results),
        "--sessions", str(tmp_path / "sessions"), timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    written = json.loads(results.read_text())
    assert written["episodes_run"] == 2
    for episode in written["episodes"]:
        # Random weights click somewhere; what matters is that the step was a parsed proposal.
        assert episode["outcome"] != "error", episode
        (step,) = read_session(Path(episode["trajectory"])).steps
        assert "error" not in step and json.loads(step["raw_text"])
