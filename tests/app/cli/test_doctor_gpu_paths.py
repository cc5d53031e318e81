"""doctor's "gpu paths" line: whether the Holo3 and Holo4 models' Gated DeltaNet gets flash-linear-attention's
Triton kernel (the engine's own loader answers, inference/engine/kernels.py), and what to install if not."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.cli.doctor_model import check_gpu_paths
from holodesk.app.cli.doctor_report import Status


@pytest.fixture
def no_fla(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """An import path where `fla` cannot be found, whatever this machine has installed."""
    kept = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "fla"}
    for name in kept:
        del sys.modules[name]
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p) / "fla").exists()])
    yield
    sys.modules.update(kept)


@pytest.fixture
def fla_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A package laid out as fla-core's, with the function transformers' Qwen3.5 calls."""
    ops = tmp_path / "fla" / "ops" / "gated_delta_rule"
    ops.mkdir(parents=True)
    for package in (tmp_path / "fla", tmp_path / "fla" / "ops"):
        (package / "__init__.py").write_text("")
    (ops / "__init__.py").write_text("def chunk_gated_delta_rule(q, k, v, g, beta, **kwargs): pass\n")
    kept = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "fla"}
    for name in kept:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.split(".")[0] == "fla"]:
        del sys.modules[name]
    sys.modules.update(kept)


def test_without_flash_linear_attention_the_line_warns_and_names_the_install(no_fla: None) -> None:
    result = check_gpu_paths()
    assert result.status is Status.WARN
    assert "fla-core is not installed" in result.detail and "PyTorch delta rule" in result.detail
    assert "fla-core" in result.fix


def test_with_flash_linear_attention_the_line_names_its_kernel(fla_package: Path) -> None:
    result = check_gpu_paths()
    assert result.status is Status.OK, result.detail
    assert "flash-linear-attention's Triton delta rule" in result.detail and "CUDA graph" in result.detail
