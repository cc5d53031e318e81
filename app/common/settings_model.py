"""The settings as Python holds them: frozen dataclasses, one per TOML table, that check themselves.

A `Settings` cannot hold an invalid value: each section runs its schema checks on construction (so
`dataclasses.replace` is checked as well) and names the bad key in `SettingValueError`. The keys,
their defaults and their checks are the schema's (settings_schema.py); the rules that involve several
keys are here (`_check_together`). Reading and writing the file is settings_toml.py's and settings.py's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.policy_factory import PolicyOptions
from holodesk.app.common.settings_checks import InvalidValue
from holodesk.app.common.settings_schema import checks_of, default_factory_of, default_of, rules_of


class SettingValueError(HolodeskAppError, ValueError):
    """One setting has a bad value. `key` is its dotted TOML name ("run.max_steps")."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class SettingsError(HolodeskAppError):
    """A settings file cannot be used as it is: `path` and every `problems` line, each naming its key."""

    def __init__(self, path: Path, problems: list[str] | tuple[str, ...]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__(f"{path}: " + "; ".join(self.problems))


class BrokenSettingsFileError(SettingsError):
    """save_settings() refused: the file on disk is broken and replacing it was not asked for."""


# ---------------------------------------------------------------------------------------------------
# The settings. Each section knows its TOML table (`TABLE`); its defaults and how each field is checked
# (`CHECKS`) come from the schema (settings_schema.py), which docs/settings.md is generated from.


class Section:
    """Checks (and normalises) every field on construction; mixin for the frozen dataclasses below."""

    __slots__ = ()
    TABLE: ClassVar[str]
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The schema's checks of the section's table, derived here rather than written in each section;
        # the top level ("") holds tables only.
        cls.CHECKS = checks_of(cls.TABLE) if cls.TABLE else {}

    def __post_init__(self) -> None:
        for name, check in self.CHECKS.items():
            try:
                value = check(getattr(self, name))
            except InvalidValue as exc:
                raise SettingValueError(dotted_key(self.TABLE, name), str(exc)) from None
            object.__setattr__(self, name, value)  # frozen: set the normalised value once
        self._check_together()

    def _check_together(self) -> None:
        """Rules that involve several fields of the section (the schema's `Requires`)."""

    def _value(self, dotted: str) -> object:
        """The value of a key of this table or a table inside it, by its dotted name ("model.remote.base_url")."""
        value: object = self
        for part in dotted.removeprefix(f"{self.TABLE}.").split("."):
            value = getattr(value, part)
        return value


def dotted_key(table: str, name: str) -> str:
    """A key's name as messages and the docs write it: "run.max_steps"; a top-level key alone."""
    return f"{table}.{name}" if table else name


@dataclass(frozen=True, slots=True)
class LocalModelSettings(Section):
    """The in-process backend: which checkpoint and where it runs."""

    TABLE: ClassVar[str] = "model.local"

    checkpoint: str = default_of("model.local.checkpoint")
    device: str = default_of("model.local.device")
    screenshot_window: str = default_of("model.local.screenshot_window")


@dataclass(frozen=True, slots=True)
class RemoteModelSettings(Section):
    """An OpenAI-compatible server (vLLM). Its API key is in the keyring or the environment, not here."""

    TABLE: ClassVar[str] = "model.remote"

    base_url: str | None = default_of("model.remote.base_url")
    model: str | None = default_of("model.remote.model")


@dataclass(frozen=True, slots=True)
class ModelSettings(Section):
    """Where the model runs and how Holodesk talks to it."""

    TABLE: ClassVar[str] = "model"

    backend: str = default_of("model.backend")
    profile: str = default_of("model.profile")
    script: Path | None = field(default=default_of("model.script"))
    local: LocalModelSettings = field(default_factory=LocalModelSettings)
    remote: RemoteModelSettings = field(default_factory=RemoteModelSettings)

    def _check_together(self) -> None:
        for rule in rules_of(self.TABLE):
            if self._value(rule.key) == rule.value and self._value(rule.needed) is None:
                raise SettingValueError(rule.needed, f"not set, but {rule.key} = {rule.value!r} needs {rule.why}")


@dataclass(frozen=True, slots=True)
class StopGesture(Section):
    """The kill switch: `key` pressed `presses` times within `within_s` seconds (default: Esc twice in 0.5 s)."""

    TABLE: ClassVar[str] = "hotkeys.stop"

    key: str = default_of("hotkeys.stop.key")
    presses: int = default_of("hotkeys.stop.presses")
    within_s: float = default_of("hotkeys.stop.within_s")


@dataclass(frozen=True, slots=True)
class HotkeySettings(Section):
    """Global keys: `prompt` opens the task prompt (pynput GlobalHotKeys syntax); `stop` ends a run."""

    TABLE: ClassVar[str] = "hotkeys"

    prompt: str = default_of("hotkeys.prompt")
    stop: StopGesture = field(default_factory=StopGesture)


@dataclass(frozen=True, slots=True)
class RunSettings(Section):
    """How a task runs: which monitor the model sees and how many steps it may take."""

    TABLE: ClassVar[str] = "run"

    monitor: int | Literal["all"] = default_of("run.monitor")  # 1-based, as the user counts them
    max_steps: int = default_of("run.max_steps")

    @property
    def capture_monitor(self) -> int | None:
        """The monitor as the capture code takes it: its number, or None for all monitors."""
        return None if self.monitor == "all" else int(self.monitor)


@dataclass(frozen=True, slots=True)
class ApprovalSettings(Section):
    """Action kinds the user lets run without asking. Empty by default: every step is approved by hand."""

    TABLE: ClassVar[str] = "approval"

    auto_approve: frozenset[str] = default_of("approval.auto_approve")


@dataclass(frozen=True, slots=True)
class SessionSettings(Section):
    """Where trajectories are recorded and how much disk they may use before the oldest are pruned."""

    TABLE: ClassVar[str] = "sessions"

    folder: Path = field(default_factory=default_factory_of("sessions.folder"))
    retention_mb: int = default_of("sessions.retention_mb")

    @property
    def retention_bytes(self) -> int:
        """The limit for automation.trajectory.prune_sessions."""
        return self.retention_mb * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Settings(Section):
    """Everything the user can set. Frozen and always valid; change it with dataclasses.replace."""

    TABLE: ClassVar[str] = ""

    model: ModelSettings = field(default_factory=ModelSettings)
    hotkeys: HotkeySettings = field(default_factory=HotkeySettings)
    run: RunSettings = field(default_factory=RunSettings)
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)

    def to_policy_options(self) -> PolicyOptions:
        """What holodesk.app.common.policy_factory.build_policy needs for the chosen backend."""
        model = self.model
        if model.backend == "local":
            served: str | None = os.path.expanduser(model.local.checkpoint)
        elif model.backend == "remote":
            served = model.remote.model
        else:
            served = None
        return PolicyOptions(
            backend=model.backend,
            profile=model.profile,
            model=served,
            base_url=model.remote.base_url if model.backend == "remote" else None,
            device=model.local.device,
            script=model.script,
            screenshot_window=model.local.screenshot_window,
        )


def sections_of(cls: type) -> dict[str, type]:
    """The fields of `cls` that are nested sections (their default factory is a dataclass)."""
    return {
        f.name: f.default_factory  # type: ignore[misc]
        for f in fields(cls)
        if isinstance(f.default_factory, type) and is_dataclass(f.default_factory)
    }
