"""`holodesk doctor --try` and bench.gpu_step run the engine's first contact through LocalBackend."""

from __future__ import annotations

import json
from pathlib import Path

from bench.gpu_step import GpuSpec, first_contact_report, load_backend, parse_arguments
from holodesk.app.cli.doctor_model import try_one_step
from holodesk.app.cli.doctor_report import Status


def test_doctor_try_runs_the_engines_first_contact(real_layout_checkpoint: Path) -> None:
    result = try_one_step(str(real_layout_checkpoint), "cpu")
    assert result.status is Status.OK, result.line()
    for words in ("in-process engine", "prefill:", "tokens/s", "decode:", "ms/token", "peak memory", "kernels in use"):
        assert words in result.detail


def test_doctor_try_says_why_a_checkpoint_does_not_load(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    config = json.loads((real_layout_checkpoint / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = ["LlavaForConditionalGeneration"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps(config), encoding="utf-8")
    result = try_one_step(str(other), "cpu")
    assert result.status is Status.FAIL and result.blocking
    assert "is not a Nemotron-Nano-VL-v2 checkpoint" in result.detail


def test_gpu_step_reports_the_first_contact_as_json(real_layout_checkpoint: Path) -> None:
    arguments = parse_arguments(
        ["--gpu-model", str(real_layout_checkpoint), "--device", "cpu", "--max-new-tokens", "8"]
    )
    backend = load_backend(arguments)
    try:
        report = first_contact_report(arguments, "cpu", GpuSpec("test", 1.0, 1.0), backend)
    finally:
        backend.unload()
    contact = json.loads(json.dumps(report))["first_contact"]  # what the command prints
    assert report["engine"] == "in-process" and report["checkpoint"] == str(real_layout_checkpoint)
    assert contact["prompt_tokens"] > 1000 and 1 <= contact["new_tokens"] <= 8
    assert contact["decode_floor_ms"] > 0 and contact["prefill_tokens_per_s"] > 0
    assert any(line.startswith("decode:") and "bandwidth floor" in line for line in report["lines"])
