"""bench.qwen35_gpu_step off the GPU: its refusal without CUDA, and its measurement on the CPU's tiny checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import qwen35_gpu_step


def test_without_cuda_it_refuses_before_building(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    import bench.qwen35_tiny

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_building(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing may be built without CUDA")

    monkeypatch.setattr(bench.qwen35_tiny, "build_qwen35_tiny", no_building)
    assert qwen35_gpu_step.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_a_row_per_history_whose_prompt_grows_with_it(tmp_path: Path) -> None:
    from bench.qwen35_tiny import build_qwen35_tiny

    checkpoint = build_qwen35_tiny(tmp_path / "tiny", dtype="float32")
    rows = qwen35_gpu_step.measure(checkpoint, "cpu", new_tokens=2)
    assert [row["history"] for row in rows] == list(qwen35_gpu_step.HISTORIES)
    assert rows[0]["prompt_tokens"] < rows[1]["prompt_tokens"]
    assert all(row["prefill_tokens_per_s"] > 0 and row["decode_ms_per_token"] > 0 for row in rows)
