"""When the tray's first start opens the first-run window: no model chosen, and the default cannot run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodesk.app.setup import first_start
from holodesk.app.setup.first_start import first_run_needed
from holodesk.inference.checkpoint import CheckpointLocation
from holodesk.inference.hardware import GIB, CudaDevice

CARD = CudaDevice(0, "NVIDIA L40S", 48 * GIB, 47 * GIB, (8, 9))


@pytest.fixture
def downloaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Holotron-12B as if it were in the Hugging Face cache."""
    monkeypatch.setattr(
        first_start, "find_checkpoint", lambda spec: CheckpointLocation(path=tmp_path, source="cache", weight_bytes=1)
    )


def test_no_settings_file_and_no_download_opens_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: Holotron-12B is not here
    monkeypatch.setattr(first_start, "cuda_devices", lambda: ((CARD,), None))
    assert first_run_needed(tmp_path / "settings.toml", model_flags_given=False)
    assert not first_run_needed(tmp_path / "settings.toml", model_flags_given=True)  # holodesk --backend remote


def test_downloaded_but_no_gpu_opens_it_and_with_a_gpu_not(downloaded, tmp_path: Path, monkeypatch) -> None:
    settings = tmp_path / "settings.toml"
    settings.write_text('[hotkeys]\nprompt = "ctrl+alt+h"\n', encoding="utf-8")  # a file, but no model chosen
    monkeypatch.setattr(first_start, "cuda_devices", lambda: ((), "no NVIDIA driver"))
    assert first_run_needed(settings, model_flags_given=False)
    monkeypatch.setattr(first_start, "cuda_devices", lambda: ((CARD,), None))
    assert not first_run_needed(settings, model_flags_given=False)


def test_a_model_table_or_a_file_that_cannot_be_read_never_opens_it(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(first_start, "cuda_devices", lambda: ((), None))
    settings = tmp_path / "settings.toml"
    settings.write_text('[model]\nbackend = "remote"\n', encoding="utf-8")
    assert not first_run_needed(settings, model_flags_given=False)
    settings.write_text("[model\n", encoding="utf-8")  # broken: the tray says what is wrong with it instead
    assert not first_run_needed(settings, model_flags_given=False)
