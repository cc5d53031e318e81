"""Command-line flags on top of the settings file: one command's settings, checked like the file's.

`holodesk run`, `locate` and `doctor` start from the same `settings.toml` as the tray app; a flag the
user gives replaces that one value for that command only. The result is a `Settings`, so every
value a flag brings is validated by the same checks as the file (a remote backend without a URL,
an unknown profile, ...), and the defaults stay written once, in `holodesk.app.common.settings`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.settings import Settings, SettingValueError

# Which flag sets which settings key, for messages about a value that came from a flag.
FLAG_FOR_KEY = {
    "model.backend": "--backend",
    "model.profile": "--profile",
    "model.script": "--script",
    "model.local.checkpoint": "--model",
    "model.local.device": "--device",
    "model.remote.base_url": "--base-url",
    "model.remote.model": "--model",
    "run.max_steps": "--max-steps",
    "run.monitor": "--monitor",
    "sessions.folder": "--sessions",
}


@dataclass(frozen=True, slots=True)
class CommandFlags:
    """The flags one command was given; None means "not given: use the settings file"."""

    backend: str | None = None
    profile: str | None = None
    model: str | None = None  # local: checkpoint folder or repo id; remote: served model name
    base_url: str | None = None
    device: str | None = None
    script: Path | None = None
    max_steps: int | None = None
    monitor: int | Literal["all"] | None = None
    sessions: Path | None = None


class FlagError(HolodeskAppError, ValueError):
    """The flags, together with the settings file, do not make valid settings. Names the key and the flag."""


def apply_flags(settings: Settings, flags: CommandFlags) -> Settings:
    """`settings` with each given flag in place of the file's value, or FlagError saying what is wrong."""
    model = settings.model
    backend = flags.backend if flags.backend is not None else model.backend
    try:
        local = _replaced(model.local, checkpoint=flags.model if backend == "local" else None, device=flags.device)
        remote = _replaced(model.remote, base_url=flags.base_url, model=flags.model if backend == "remote" else None)
        model = _replaced(
            model, backend=flags.backend, profile=flags.profile, script=flags.script, local=local, remote=remote
        )
        run = _replaced(settings.run, max_steps=flags.max_steps, monitor=flags.monitor)
        sessions = _replaced(settings.sessions, folder=flags.sessions)
        return dataclasses.replace(settings, model=model, run=run, sessions=sessions)
    except SettingValueError as exc:
        flag = FLAG_FOR_KEY.get(exc.key)
        where = f"pass {flag}, or set {exc.key} in the settings file" if flag else f"set {exc.key} in the settings file"
        raise FlagError(f"{exc} ({where})") from None


_Section = TypeVar("_Section")


def _replaced(section: _Section, **values: Any) -> _Section:
    """dataclasses.replace with only the values that are not None (the flags that were given)."""
    given = {name: value for name, value in values.items() if value is not None}
    return dataclasses.replace(section, **given) if given else section  # type: ignore[type-var]
