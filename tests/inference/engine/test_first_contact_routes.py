"""A checkpoint in the real layout goes to the engine's first contact in `doctor --try` and bench.gpu_step.

`real_layout` reads config.json and the safetensors headers: the real tensor names
(`language_model.backbone.*`) say this engine loads it; the stand-in's names, another architecture or
no weights send the checkpoint the way it went before (LocalBackend).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from safetensors.torch import load_file, save_file

from bench.gpu_step import GpuSpec, first_contact_report, parse_arguments
from holodesk.app.cli.doctor import Status, try_one_step
from holodesk.inference.engine.spec import real_layout


def _renamed(source: Path, target: Path, old: str, new: str) -> Path:
    shutil.copytree(source, target)
    tensors = load_file(str(target / "model.safetensors"))
    save_file({name.replace(old, new, 1): t for name, t in tensors.items()}, str(target / "model.safetensors"))
    (target / "model.safetensors.index.json").unlink()
    return target


def test_the_real_names_are_told_from_the_standins_and_from_other_folders(
    real_layout_checkpoint: Path, tmp_path: Path
) -> None:
    assert real_layout(real_layout_checkpoint)
    standin = _renamed(
        real_layout_checkpoint, tmp_path / "standin", "language_model.backbone.", "language_model.model."
    )
    assert not real_layout(standin)
    other = tmp_path / "other"
    shutil.copytree(real_layout_checkpoint, other)
    config = json.loads((other / "config.json").read_text(encoding="utf-8"))
    config["architectures"] = ["LlavaForConditionalGeneration"]
    (other / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert not real_layout(other)
    empty = tmp_path / "empty"
    shutil.copytree(real_layout_checkpoint, empty, ignore=shutil.ignore_patterns("*.safetensors*"))
    assert not real_layout(empty)
    assert not real_layout(tmp_path / "nowhere")


def test_doctor_try_runs_the_engines_first_contact(real_layout_checkpoint: Path) -> None:
    result = try_one_step(str(real_layout_checkpoint), "cpu")
    assert result.status is Status.OK, result.line()
    for words in ("in-process engine", "prefill:", "tokens/s", "decode:", "ms/token", "peak memory", "kernels in use"):
        assert words in result.detail


def test_gpu_step_reports_the_first_contact_as_json(real_layout_checkpoint: Path) -> None:
    arguments = parse_arguments(
        ["--gpu-model", str(real_layout_checkpoint), "--device", "cpu", "--max-new-tokens", "8"]
    )
    report = first_contact_report(arguments, "cpu", GpuSpec("test", 1.0, 1.0))
    contact = json.loads(json.dumps(report))["first_contact"]  # what the command prints
    assert report["engine"] == "in-process" and report["checkpoint"] == str(real_layout_checkpoint)
    assert contact["prompt_tokens"] > 1000 and 1 <= contact["new_tokens"] <= 8
    assert contact["decode_floor_ms"] > 0 and contact["prefill_tokens_per_s"] > 0
    assert any(line.startswith("decode:") and "bandwidth floor" in line for line in report["lines"])
