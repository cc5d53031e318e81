"""Write the chosen model into the settings file, through the settings module's own API.

Only the model's table changes (backend local, the profile, the checkpoint folder, the device); every
other value of the file is kept. The file is replaced atomically (`save_settings`), and only after the
model is whole on disk, so a cancel or a fault before that leaves the file as it was.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from holodesk.app.common.settings import BrokenSettingsFileError, Settings, load_settings, save_settings
from holodesk.app.setup.errors import SetupError


def chosen_settings(current: Settings, checkpoint: Path, profile: str, device: str) -> Settings:
    model = current.model
    local = replace(model.local, checkpoint=str(checkpoint), device=device)
    return replace(current, model=replace(model, backend="local", profile=profile, local=local))


def save_choice(checkpoint: Path, profile: str, device: str, path: Path | None = None) -> Path:
    """Make `checkpoint` the model used; returns the settings file. SetupError in words when it cannot."""
    loaded = load_settings(path)
    if loaded.problem is not None:
        problems = "; ".join(loaded.problem.problems)
        raise SetupError(
            f"the settings file {loaded.path} has problems ({problems}), so it was not changed: fix it (or move it"
            f" away) and run holodesk setup again. The model is downloaded and stays at {checkpoint}"
        )
    try:
        save_settings(chosen_settings(loaded.settings, checkpoint, profile, device), loaded.path)
    except BrokenSettingsFileError as exc:  # changed on disk since it was read
        raise SetupError(f"the settings file {exc.path} was not changed: {'; '.join(exc.problems)}") from None
    except OSError as exc:
        raise SetupError(f"cannot write the settings file {loaded.path}: {exc.strerror or exc}") from None
    return loaded.path
