"""bench.cuda_parity without a GPU: its comparison of two runs, and its refusal before building anything."""

from __future__ import annotations

import pytest

from bench import cuda_parity


def test_the_comparison_counts_agreeing_tokens_and_the_gap_among_them_only() -> None:
    reference = [([1, 2, 3, 4], [-0.1, -0.2, -0.3, -0.4]), ([5, 6], [-1.0, -2.0])]
    other = [([1, 2, 9, 4], [-0.1, -0.25, -5.0, -0.4]), ([5, 6], [-1.0, -2.0])]
    rows = cuda_parity.compare(reference, other)["requests"]
    assert [row["agree"] for row in rows] == [2, 2]
    # The third token differs, so its large gap (4.7) is not counted: only the 0.05 before it.
    assert rows[0]["max_logprob_gap"] == pytest.approx(0.05)
    assert rows[1]["max_logprob_gap"] == 0.0


def test_without_cuda_it_refuses_before_building(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    import bench.nemotron_tiny

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def no_building(*args: object, **kwargs: object) -> None:
        raise AssertionError("nothing may be built without CUDA")

    monkeypatch.setattr(bench.nemotron_tiny, "build_nemotron_tiny", no_building)
    assert cuda_parity.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
