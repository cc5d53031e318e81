"""Whether the tray's first start opens the first-run window: no model chosen, and the default cannot run.

The window opens when both hold:
- no model was ever chosen: no settings file, or one without a [model] table (`holodesk setup` and the
  first-run window write that table; the settings window writes it too once saved), and no --backend
  or --model flags for this start;
- the default model cannot run here: Holotron-12B is not in the Hugging Face cache, or this computer has
  no NVIDIA GPU for it (the in-process engine would take minutes a step on the CPU).
A settings file with problems never opens it (the tray says what is wrong with the file instead), and
once a choice is saved the [model] table is there, so it does not open again.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from holodesk.inference.checkpoint import DEFAULT_REPO_ID, find_checkpoint
from holodesk.inference.errors import ModelLoadError
from holodesk.inference.hardware import cuda_devices


def model_chosen(settings_file: Path) -> bool:
    """True when the settings file exists and has a [model] table; a file that cannot be read counts as chosen
    (its problems are said elsewhere, and a window must not talk over them)."""
    try:
        text = settings_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError:
        return True
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return True
    return "model" in table


def default_model_runs_here() -> bool:
    """Holotron-12B is downloaded (found offline) and a CUDA GPU is visible: the default backend can load it."""
    try:
        find_checkpoint(DEFAULT_REPO_ID)
    except ModelLoadError:
        return False
    return bool(cuda_devices()[0])


def first_run_needed(settings_file: Path, model_flags_given: bool) -> bool:
    if model_flags_given or model_chosen(settings_file):
        return False
    return not default_model_runs_here()
