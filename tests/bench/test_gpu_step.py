"""bench.gpu_step's pure parts: arguments, the GPU table, the floors, finding screenshots, failing fast."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from bench import gpu_step
from bench.gpu_step import (
    GpuSpec,
    decode_floor_s,
    find_screenshots,
    gpu_spec,
    main,
    parse_arguments,
    prefill_floor_s,
)
from holodesk.automation.proposal import StepTimings

TWELVE_B = 12_000_000_000


def test_arguments_defaults_and_overrides(tmp_path: Path) -> None:
    arguments = parse_arguments([str(tmp_path), "a.png", "shots"])
    assert arguments.checkpoint == tmp_path
    assert arguments.screenshots == [Path("a.png"), Path("shots")]
    assert (arguments.steps, arguments.warmup, arguments.max_new_tokens, arguments.max_tiles) == (10, 1, 128, 12)
    assert arguments.bandwidth is None and arguments.tflops is None
    arguments = parse_arguments(
        ["m", "s", "--steps", "3", "--bandwidth", "1.5", "--tflops", "200", "--device", "cuda:1"]
    )
    assert (arguments.steps, arguments.bandwidth, arguments.tflops, arguments.device) == (3, 1.5, 200.0, "cuda:1")


@pytest.mark.parametrize(
    "argv", [[], ["m", "s", "--steps", "0"], ["m", "s", "--bandwidth", "-1"], ["m", "s", "--tflops", "0"]]
)
def test_bad_arguments_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_arguments(argv)
    assert exit_info.value.code == 2


@pytest.mark.parametrize(
    ("device_name", "name", "bandwidth", "tflops"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 3.35, 989.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 2.0, 756.0),
        ("NVIDIA H200", "H200", 4.8, 989.0),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB", 2.0, 312.0),
        ("NVIDIA A100-SXM4-40GB", "A100 40GB", 1.555, 312.0),
        ("NVIDIA L40S", "L40S", 0.864, 362.0),
    ],
)
def test_gpu_table_by_device_name(device_name: str, name: str, bandwidth: float, tflops: float) -> None:
    assert gpu_spec(device_name) == GpuSpec(name, bandwidth, tflops)


def test_overrides_and_unknown_gpus() -> None:
    assert gpu_spec("NVIDIA L40S", bandwidth_tb_s=1.0) == GpuSpec("L40S", 1.0, 362.0)
    assert gpu_spec("NVIDIA RTX 6000 Ada", 0.96, 364.0) == GpuSpec("NVIDIA RTX 6000 Ada", 0.96, 364.0)
    with pytest.raises(ValueError, match="--bandwidth"):
        gpu_spec("NVIDIA RTX 6000 Ada", bandwidth_tb_s=0.96)


def test_floor_arithmetic() -> None:
    h100 = gpu_spec("NVIDIA H100 80GB HBM3")
    # 12B parameters in bf16 are 24 GB: read once per token at 3.35 TB/s.
    assert decode_floor_s(2 * TWELVE_B, h100) == pytest.approx(24e9 / 3.35e12)
    assert 1 / decode_floor_s(2 * TWELVE_B, h100) == pytest.approx(139.6, abs=0.1)
    # 3,300 prompt tokens: 2 * 12e9 * 3300 FLOPs at 989 TFLOP/s.
    assert prefill_floor_s(TWELVE_B, 3300, h100) == pytest.approx(2 * 12e9 * 3300 / 989e12)
    assert prefill_floor_s(TWELVE_B, 3300, h100) == pytest.approx(0.0801, abs=1e-4)
    l40s = gpu_spec("NVIDIA L40S")
    assert decode_floor_s(2 * TWELVE_B, l40s) > decode_floor_s(2 * TWELVE_B, h100)


def test_step_report_rates_against_floors() -> None:
    spec = GpuSpec("test", 2.0, 100.0)
    timings = StepTimings(preprocess_s=0.02, prefill_s=0.5, decode_s=1.0, total_s=1.52, tokens_in=4000, tokens_out=51)
    report = gpu_step._step_report(timings, 30 * 2**30, TWELVE_B, 2 * TWELVE_B, spec)
    assert report["prefill_tokens_per_s"] == pytest.approx(8000)
    assert report["decode_tokens_per_s"] == pytest.approx(50)  # the first token belongs to the prefill
    assert report["prefill_floor_s"] == pytest.approx(2 * 12e9 * 4000 / 100e12)
    assert report["decode_ceiling_tokens_per_s"] == pytest.approx(2e12 / 24e9)
    assert report["peak_vram_bytes"] == 30 * 2**30


def test_a_step_that_reused_the_kept_state_is_rated_on_the_tokens_it_computed() -> None:
    spec = GpuSpec("test", 2.0, 100.0)
    timings = StepTimings(prefill_s=0.5, decode_s=1.0, total_s=1.5, tokens_in=4000, tokens_out=51, tokens_reused=3000)
    report = gpu_step._step_report(timings, 30 * 2**30, TWELVE_B, 2 * TWELVE_B, spec)
    assert report["tokens_prefilled"] == 1000
    assert report["prefill_tokens_per_s"] == pytest.approx(2000)
    assert report["prefill_floor_s"] == pytest.approx(2 * 12e9 * 1000 / 100e12)


def test_screenshots_from_files_and_folders(tmp_path: Path) -> None:
    folder = tmp_path / "shots"
    folder.mkdir()
    for name in ("b.png", "a.PNG", "notes.txt"):
        (folder / name).write_bytes(b"")
    single = tmp_path / "one.png"
    Image.new("RGB", (4, 4)).save(single)
    assert find_screenshots([single, folder]) == [single, folder / "a.PNG", folder / "b.png"]
    with pytest.raises(ValueError, match="neither a PNG"):
        find_screenshots([tmp_path / "missing.png"])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no PNG"):
        find_screenshots([empty])


def test_without_cuda_it_fails_fast_and_loads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    import holodesk.inference.local

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_loading(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing may be loaded without CUDA")

    monkeypatch.setattr(holodesk.inference.local, "LocalBackend", no_loading)
    Image.new("RGB", (4, 4)).save(tmp_path / "s.png")
    assert main([str(tmp_path / "model"), str(tmp_path / "s.png")]) == 2
    message = capsys.readouterr().err
    assert "needs a CUDA GPU" in message
    assert "python -m bench" in message


def test_report_becomes_bench_figures() -> None:
    spec = GpuSpec("H100 SXM", 3.35, 989.0)
    timings = StepTimings(preprocess_s=0.02, prefill_s=0.2, decode_s=0.8, total_s=1.02, tokens_in=3500, tokens_out=81)
    step = gpu_step._step_report(timings, 27 * 2**30, TWELVE_B, 2 * TWELVE_B, spec)
    report = {
        "device": "NVIDIA H100 80GB HBM3",
        "gpu": {"name": "H100 SXM"},
        "checkpoint": "/models/holotron",
        "mamba_kernels": True,
        "summary": {"step_s": 1.02, "decode_tokens_per_s": 100.0},
        "steps": [step, step],
    }
    result = gpu_step.bench_result(report)
    figures = {figure.name: figure for figure in result.figures}
    assert figures["decode per token"].stats.median == pytest.approx(10.0)  # 800 ms / 80 tokens
    assert figures["decode per token"].baseline == "decode per token floor"
    assert figures["decode per token floor"].stats.median == pytest.approx(24e9 / 3.35e12 * 1000)
    assert figures["prefill"].baseline == "prefill floor"
    assert figures["peak VRAM"].stats.median == pytest.approx(27.0)
    assert "H100 SXM" in result.notes[0]


def test_gpu_model_names_the_checkpoint_and_screenshots_are_optional(tmp_path: Path) -> None:
    arguments = parse_arguments(["--gpu-model", str(tmp_path)])
    assert arguments.checkpoint == tmp_path and arguments.screenshots == []
    arguments = parse_arguments(["--gpu-model", str(tmp_path), "a.png", "shots"])
    assert arguments.checkpoint == tmp_path and arguments.screenshots == [Path("a.png"), Path("shots")]
    with pytest.raises(SystemExit):
        parse_arguments([])


def test_canned_screenshots_are_desktop_sized_and_differ() -> None:
    pictures = gpu_step.canned_screenshots()
    assert [p.size for p in pictures] == [(1920, 1080)] * len(gpu_step.CANNED_SEEDS)
    assert pictures[0].tobytes() != pictures[1].tobytes()


def test_each_step_line_says_what_was_proposed_next_to_the_speeds() -> None:
    timings = StepTimings(preprocess_s=0.01, prefill_s=0.5, decode_s=2.0, total_s=2.6, tokens_in=3000, tokens_out=41)
    step = gpu_step._step_report(timings, 26 * 2**30, TWELVE_B, 2 * TWELVE_B, GpuSpec("L40S", 0.864, 362.0))
    step.update(parsed=True, proposed=gpu_step.printable("click at (512, 87) on 'Archive'\x1b[2J"))
    line = gpu_step.format_step(1, step)
    assert line.startswith("step 1: proposed click at (512, 87) on 'Archive'\\x1b[2J |")
    assert "prefill 6,000 tok/s" in line and "decode 20.0 tok/s (ceiling 36.0)" in line
    assert "peak VRAM 26.0 GiB" in line and line.isprintable()
    step.update(parsed=False, proposed="click_desktop has no argument 'element'")
    assert gpu_step.format_step(2, step).startswith("step 2: did not parse: click_desktop has no argument")
