"""Write the chosen model into the settings file, through the settings module's own API.

Only the model's table changes (backend local with the profile, checkpoint folder and device; or backend
remote with the server's URL and model); every other value of the file is kept. The file is replaced
atomically (`save_settings`), and only after the model is whole on disk or the server answered, so a
cancel or a fault before that leaves the file as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from holodesk.app.common.settings import BrokenSettingsFileError, Settings, load_settings, save_settings
from holodesk.app.setup.errors import SetupError


def chosen_settings(current: Settings, checkpoint: Path, profile: str, device: str) -> Settings:
    model = current.model
    local = replace(model.local, checkpoint=str(checkpoint), device=device)
    return replace(current, model=replace(model, backend="local", profile=profile, local=local))


def remote_settings(current: Settings, base_url: str, served_model: str, profile: str) -> Settings:
    model = current.model
    remote = replace(model.remote, base_url=base_url, model=served_model)
    return replace(current, model=replace(model, backend="remote", profile=profile, remote=remote))


def save_choice(checkpoint: Path, profile: str, device: str, path: Path | None = None) -> Path:
    """Make `checkpoint` the model used; returns the settings file. SetupError in words when it cannot."""
    kept = f"The model is downloaded and stays at {checkpoint}"
    return _save(lambda current: chosen_settings(current, checkpoint, profile, device), kept, path)


def save_remote_choice(base_url: str, served_model: str, profile: str, path: Path | None = None) -> Path:
    """Make the server at `base_url` (serving `served_model`) the model used; returns the settings file."""
    kept = f"The server at {base_url} answered; choose it again once the file is fixed"
    return _save(lambda current: remote_settings(current, base_url, served_model, profile), kept, path)


def _save(change: Callable[[Settings], Settings], kept: str, path: Path | None) -> Path:
    loaded = load_settings(path)
    if loaded.problem is not None:
        problems = "; ".join(loaded.problem.problems)
        raise SetupError(
            f"the settings file {loaded.path} has problems ({problems}), so it was not changed: fix it (or move it"
            f" away) and run holodesk setup again. {kept}"
        )
    try:
        save_settings(change(loaded.settings), loaded.path)
    except BrokenSettingsFileError as exc:  # changed on disk since it was read
        raise SetupError(f"the settings file {exc.path} was not changed: {'; '.join(exc.problems)}") from None
    except OSError as exc:
        raise SetupError(f"cannot write the settings file {loaded.path}: {exc.strerror or exc}") from None
    return loaded.path
