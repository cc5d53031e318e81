"""Hardware probing: devices, Mamba kernels, the one-line verdict, and a torch-free import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.inference.hardware import (
    GIB,
    CudaDevice,
    KernelStatus,
    MambaPath,
    detect_hardware,
    mamba_path,
    probe_kernel,
    verdict,
)

GPU = CudaDevice(index=0, name="NVIDIA L40S", total_bytes=48 * GIB, free_bytes=46 * GIB, capability=(8, 9))
KERNELS_OK = (KernelStatus("mamba-ssm", "2.2.5", True), KernelStatus("causal-conv1d", "1.5.2", True))
KERNELS_MISSING = (
    KernelStatus("mamba-ssm", None, False, "ModuleNotFoundError: No module named 'mamba_ssm'"),
    KernelStatus("causal-conv1d", "1.5.2", True),
)


def test_importing_hardware_and_checkpoint_does_not_import_torch() -> None:
    code = (
        "import sys, inference.hardware, inference.checkpoint;"
        "heavy = [m for m in ('torch', 'transformers', 'mamba_ssm') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == ""


def test_path_needs_a_gpu_and_both_kernels() -> None:
    assert mamba_path([], KERNELS_OK) is MambaPath.CPU
    assert mamba_path([GPU], KERNELS_MISSING) is MambaPath.SLOW_TORCH
    assert mamba_path([GPU], ()) is MambaPath.SLOW_TORCH
    assert mamba_path([GPU], KERNELS_OK) is MambaPath.FAST_CUDA


def test_verdict_names_the_device_the_missing_kernel_and_the_fix() -> None:
    fast = verdict(MambaPath.FAST_CUDA, [GPU], KERNELS_OK)
    slow = verdict(MambaPath.SLOW_TORCH, [GPU], KERNELS_MISSING)
    cpu = verdict(MambaPath.CPU, [], KERNELS_MISSING)
    assert "fast CUDA kernels" in fast and "cuda:0 (NVIDIA L40S)" in fast
    assert "mamba-ssm not usable" in slow and "causal-conv1d not usable" not in slow
    assert "PyTorch scan on the GPU" in slow and "fallback" not in slow
    assert "pip install --no-build-isolation" in slow
    # No GPU: the engine's CPU path exists, but is no way to run Holotron-12B.
    assert "No CUDA GPU" in cpu and "minutes a step for Holotron-12B" in cpu and "\n" not in cpu


def test_device_description_has_free_and_total_memory() -> None:
    assert GPU.describe() == "cuda:0 (NVIDIA L40S): 46.0 GiB free of 48.0 GiB"


def test_this_machine_is_reported_with_torch_and_kernel_errors() -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this test describes a machine without CUDA")
    report = detect_hardware()
    assert report.torch.version == torch.__version__
    assert report.devices == ()
    assert report.path is MambaPath.CPU
    assert report.verdict.startswith("No CUDA GPU")
    assert [k.package for k in report.kernels] == ["mamba-ssm", "causal-conv1d"]
    for kernel in report.kernels:
        if not kernel.importable:
            assert kernel.error and "\n" not in kernel.error


_KERNEL_PACKAGES = ("mamba_ssm", "causal_conv1d")


@pytest.fixture
def fake_kernels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Importable stand-ins for mamba_ssm (working) and causal_conv1d (its extension fails to load)."""
    triton = tmp_path / "mamba_ssm" / "ops" / "triton"
    triton.mkdir(parents=True)
    for package in (tmp_path / "mamba_ssm", tmp_path / "mamba_ssm" / "ops", triton):
        (package / "__init__.py").write_text("")
    (triton / "selective_state_update.py").write_text("def selective_state_update(*a): pass\n")
    (triton / "ssd_combined.py").write_text(
        "def mamba_chunk_scan_combined(*a): pass\ndef mamba_split_conv1d_scan_combined(*a): pass\n"
    )
    (tmp_path / "causal_conv1d").mkdir()
    (tmp_path / "causal_conv1d" / "__init__.py").write_text(
        textwrap.dedent(
            """
            raise OSError("libcudart.so.12: cannot open shared object file: No such file or directory")
            """
        )
    )
    # The session may already have imported a real mamba_ssm or causal_conv1d (a CUDA machine with the
    # cuda extra): set them aside so these fakes are what gets imported, and put them back after.
    kept = {name: module for name, module in sys.modules.items() if name.split(".")[0] in _KERNEL_PACKAGES}
    for name in kept:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in list(sys.modules):
        if name.split(".")[0] in _KERNEL_PACKAGES:
            del sys.modules[name]
    sys.modules.update(kept)


def test_kernel_probe_imports_the_functions_the_model_calls(fake_kernels: Path) -> None:
    mamba = probe_kernel("mamba-ssm")
    conv = probe_kernel("causal-conv1d")
    assert mamba.importable and mamba.error is None
    assert not conv.importable
    assert conv.error == "OSError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert "not usable (OSError" in conv.describe()
    # mamba-ssm's kernels with PyTorch's convolution beside them: not the slow path, and said so
    assert mamba_path([GPU], (mamba, conv)) is MambaPath.KERNELS_NO_CONV
    assert "mamba-ssm's Triton kernels" in verdict(MambaPath.KERNELS_NO_CONV, [GPU], (mamba, conv))
    assert mamba_path([GPU], (conv,)) is MambaPath.SLOW_TORCH


def test_mamba_ssm_built_without_cuda_still_gives_its_triton_kernels(fake_kernels: Path) -> None:
    # As installed with MAMBA_SKIP_CUDA_BUILD: the package's __init__ imports the compiled Mamba-1 scan, absent.
    (fake_kernels / "mamba_ssm" / "__init__.py").write_text("import selective_scan_cuda\n")
    status = probe_kernel("mamba-ssm")
    assert status.importable and status.build == "Triton"
    assert "ok (Triton kernels)" in status.describe()


def test_kernel_probe_rejects_a_package_missing_a_function(fake_kernels: Path) -> None:
    (fake_kernels / "mamba_ssm" / "ops" / "triton" / "selective_state_update.py").write_text("")
    status = probe_kernel("mamba-ssm")
    assert not status.importable
    assert status.error is not None and "has no attribute 'selective_state_update'" in status.error
    assert "mamba_ssm" not in sys.modules  # a failed load leaves nothing half-imported behind


def test_unknown_kernel_package_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown kernel package"):
        probe_kernel("flash-attn")
