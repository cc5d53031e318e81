"""Holodesk's user settings: a frozen, validated `Settings` and its TOML file. No Qt here.

The file is `<user config folder>/holodesk/settings.toml` (platformdirs; ~/.config/holodesk on
Linux). Its tables mirror the dataclasses: [model] (+ [model.local], [model.remote]), [hotkeys]
(+ [hotkeys.stop]), [run], [approval], [sessions]; a missing key takes its default.

- Every value is checked when read, and every problem is reported at once, each naming its key and
  the bad value; unknown keys are problems too. A `Settings` cannot hold an invalid value: the
  dataclasses check themselves on construction (so `dataclasses.replace` is checked as well).
- `load_settings()` never raises for a bad file: it returns the file's valid values, the default
  for each bad one (a line that is not valid TOML costs only that line), together with a
  `SettingsError` (path + a problem per key) so the app can run and show what is wrong. One bad
  value never drops the others: a remote server's URL survives a typo in the step limit.
- Only a regular file is read, and at most 1 MiB of it: a FIFO, a link to a device or to nothing
  is a problem said in words, never a hang or a crash.
- A broken file is never overwritten behind the user's back: `save_settings()` refuses with
  `BrokenSettingsFileError` while the file on disk is broken. Replacing it is an explicit choice,
  `replace_broken=True`, and even then a copy is kept first (settings.toml.broken-<time>).
- Writes are atomic: a temp file in the same folder, fsync, os.replace, so a crash leaves either
  the old file or the new one.
- The remote server's API key is not a setting: it lives in the OS keyring or HOLODESK_API_KEY
  (`inference.secrets`). The helpers at the bottom store it there for the settings' server; an
  `api_key` written into the file by hand is refused, and its value is never echoed.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import tomli_w

from holodesk.app.common.choices import BACKENDS, DEVICES
from holodesk.app.common.settings_checks import InvalidValue, normalize_server_url, show_value, validate_hotkey
from holodesk.app.common.settings_schema import (
    DEFAULT_CHECKPOINT,
    SETTINGS_FORMAT,
    checks_of,
    default_factory_of,
    default_of,
)
from holodesk.automation.hotkey_syntax import DEFAULT_PROMPT_HOTKEY
from holodesk.inference import secrets

if TYPE_CHECKING:
    from holodesk.app.common.policy_factory import PolicyOptions

SETTINGS_FILE_NAME = "settings.toml"
MAX_SETTINGS_BYTES = 1024 * 1024  # a settings file is a few hundred bytes; more is not one
MAX_BAD_LINES = 20  # TOML lines skipped before giving up on the whole file
_ERROR_LINE = re.compile(r"at line (\d+)")

# Keys that look like secrets: refused in the file, and their values are never repeated in messages.
SECRET_KEY_NAMES = frozenset({"api_key", "apikey", "key_value", "token", "password", "secret"})


class SettingValueError(ValueError):
    """One setting has a bad value. `key` is its dotted TOML name ("run.max_steps")."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class SettingsError(Exception):
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


class _Section:
    """Checks (and normalises) every field on construction; mixin for the frozen dataclasses below."""

    __slots__ = ()
    TABLE: ClassVar[str]
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = {}

    def __post_init__(self) -> None:
        for name, check in self.CHECKS.items():
            try:
                value = check(getattr(self, name))
            except InvalidValue as exc:
                raise SettingValueError(_dotted(self.TABLE, name), str(exc)) from None
            object.__setattr__(self, name, value)  # frozen: set the normalised value once
        self._check_together()

    def _check_together(self) -> None:
        """Rules that involve several fields of the section."""


def _dotted(table: str, name: str) -> str:
    return f"{table}.{name}" if table else name


@dataclass(frozen=True, slots=True)
class LocalModelSettings(_Section):
    """The in-process backend: which checkpoint and where it runs."""

    TABLE: ClassVar[str] = "model.local"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("model.local")

    checkpoint: str = default_of("model.local.checkpoint")
    device: str = default_of("model.local.device")
    screenshot_window: str = default_of("model.local.screenshot_window")


@dataclass(frozen=True, slots=True)
class RemoteModelSettings(_Section):
    """An OpenAI-compatible server (vLLM). Its API key is in the keyring or the environment, not here."""

    TABLE: ClassVar[str] = "model.remote"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("model.remote")

    base_url: str | None = default_of("model.remote.base_url")
    model: str | None = default_of("model.remote.model")


@dataclass(frozen=True, slots=True)
class ModelSettings(_Section):
    """Where the model runs and how Holodesk talks to it."""

    TABLE: ClassVar[str] = "model"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("model")

    backend: str = default_of("model.backend")
    profile: str = default_of("model.profile")
    script: Path | None = field(default=default_of("model.script"))
    local: LocalModelSettings = field(default_factory=LocalModelSettings)
    remote: RemoteModelSettings = field(default_factory=RemoteModelSettings)

    def _check_together(self) -> None:
        if self.backend == "remote" and self.remote.base_url is None:
            raise SettingValueError(
                "model.remote.base_url", "not set, but model.backend = 'remote' needs the server's URL"
            )
        if self.backend == "scripted" and self.script is None:
            raise SettingValueError(
                "model.script", "not set, but model.backend = 'scripted' needs a JSONL file of answers"
            )


@dataclass(frozen=True, slots=True)
class StopGesture(_Section):
    """The kill switch: `key` pressed `presses` times within `within_s` seconds (default: Esc twice in 0.5 s)."""

    TABLE: ClassVar[str] = "hotkeys.stop"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("hotkeys.stop")

    key: str = default_of("hotkeys.stop.key")
    presses: int = default_of("hotkeys.stop.presses")
    within_s: float = default_of("hotkeys.stop.within_s")


@dataclass(frozen=True, slots=True)
class HotkeySettings(_Section):
    """Global keys: `prompt` opens the task prompt (pynput GlobalHotKeys syntax); `stop` ends a run."""

    TABLE: ClassVar[str] = "hotkeys"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("hotkeys")

    prompt: str = default_of("hotkeys.prompt")
    stop: StopGesture = field(default_factory=StopGesture)


@dataclass(frozen=True, slots=True)
class RunSettings(_Section):
    """How a task runs: which monitor the model sees and how many steps it may take."""

    TABLE: ClassVar[str] = "run"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("run")

    monitor: int | Literal["all"] = default_of("run.monitor")  # 1-based, as the user counts them
    max_steps: int = default_of("run.max_steps")

    @property
    def capture_monitor(self) -> int | None:
        """The monitor as the capture code takes it: its number, or None for all monitors."""
        return None if self.monitor == "all" else int(self.monitor)


@dataclass(frozen=True, slots=True)
class ApprovalSettings(_Section):
    """Action kinds the user lets run without asking. Empty by default: every step is approved by hand."""

    TABLE: ClassVar[str] = "approval"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("approval")

    auto_approve: frozenset[str] = default_of("approval.auto_approve")


@dataclass(frozen=True, slots=True)
class SessionSettings(_Section):
    """Where trajectories are recorded and how much disk they may use before the oldest are pruned."""

    TABLE: ClassVar[str] = "sessions"
    CHECKS: ClassVar[Mapping[str, Callable[[Any], Any]]] = checks_of("sessions")

    folder: Path = field(default_factory=default_factory_of("sessions.folder"))
    retention_mb: int = default_of("sessions.retention_mb")

    @property
    def retention_bytes(self) -> int:
        """The limit for automation.trajectory.prune_sessions."""
        return self.retention_mb * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Settings(_Section):
    """Everything the user can set. Frozen and always valid; change it with dataclasses.replace."""

    TABLE: ClassVar[str] = ""

    model: ModelSettings = field(default_factory=ModelSettings)
    hotkeys: HotkeySettings = field(default_factory=HotkeySettings)
    run: RunSettings = field(default_factory=RunSettings)
    approval: ApprovalSettings = field(default_factory=ApprovalSettings)
    sessions: SessionSettings = field(default_factory=SessionSettings)

    def to_policy_options(self) -> PolicyOptions:
        """What holodesk.app.common.policy_factory.build_policy needs for the chosen backend."""
        from holodesk.app.common.policy_factory import PolicyOptions

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


# ---------------------------------------------------------------------------------------------------
# TOML <-> Settings


def settings_path() -> Path:
    """The settings file: <user config folder>/holodesk/settings.toml (~/.config/holodesk on Linux)."""
    from platformdirs import user_config_path

    return user_config_path("holodesk", appauthor=False) / SETTINGS_FILE_NAME


def _sections(cls: type) -> dict[str, type]:
    """The fields of `cls` that are nested sections (their default factory is a dataclass)."""
    return {
        f.name: f.default_factory  # type: ignore[misc]
        for f in fields(cls)
        if isinstance(f.default_factory, type) and is_dataclass(f.default_factory)
    }


def _build(cls: type[_Section], data: Mapping[str, Any], problems: list[str]) -> Any:
    """A `cls` from a TOML table, or None after adding every problem found (each naming its key)."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    sections = _sections(cls)
    values: dict[str, Any] = {}
    found_before = len(problems)
    for name, raw in data.items():
        key = _dotted(cls.TABLE, name)
        if name == "version" and cls is Settings:
            continue
        if name.lower() in SECRET_KEY_NAMES:
            problems.append(
                f"{key}: secrets are never read from the settings file (it is plain text); store the API key in "
                f"the OS keyring from Holodesk's settings, or set {' or '.join(secrets.API_KEY_ENV_VARS)}"
            )
        elif name not in known:
            problems.append(f"unknown key {key!r} (known here: {', '.join(sorted(known))})")
        elif name in sections:
            if not isinstance(raw, Mapping):
                problems.append(f"{key}: expected a table [{key}], got {show_value(raw)}")
                continue
            section = _build(sections[name], raw, problems)
            if section is not None:
                values[name] = section
        else:
            try:
                values[name] = cls.CHECKS[name](raw)
            except InvalidValue as exc:
                problems.append(f"{key}: {exc}")
    if len(problems) > found_before:
        return None
    try:
        return cls(**values)
    except SettingValueError as exc:  # rules across fields (the remote backend needs a URL...)
        problems.append(str(exc))
        return None


# The fields a rule across fields looks at: the one to default when the rule fails.
_RULE_FIELDS = frozenset({"backend"})


def _salvage(cls: type[_Section], data: object) -> Any:
    """A `cls` from the valid values of a table and defaults for the rest (never raises)."""
    sections = _sections(cls)
    values: dict[str, Any] = {}
    for name, raw in data.items() if isinstance(data, Mapping) else ():
        if name in sections:
            values[name] = _salvage(sections[name], raw)
        elif name in cls.CHECKS and name.lower() not in SECRET_KEY_NAMES:
            with suppress(InvalidValue):
                values[name] = cls.CHECKS[name](raw)
    try:
        return cls(**values)
    except SettingValueError:  # a rule across fields (the remote backend without a URL): default its fields
        kept = {name: value for name, value in values.items() if name in sections or name not in _RULE_FIELDS}
        try:
            return cls(**kept)
        except SettingValueError:
            return cls(**{name: value for name, value in values.items() if name in sections})


def _parse_leniently(text: str) -> tuple[dict[str, Any], list[str]]:
    """The file's tables, reading past lines that are not valid TOML; and a problem for each such line.

    A syntax error drops only its own line, so a typo in one value keeps every other value (the
    remote server's URL above all). After MAX_BAD_LINES bad lines nothing is kept.
    """
    lines = text.split("\n")
    problems: list[str] = []
    for _ in range(MAX_BAD_LINES):
        try:
            return tomllib.loads("\n".join(lines)), problems
        except tomllib.TOMLDecodeError as exc:
            found = _ERROR_LINE.search(str(exc))
            number = int(found.group(1)) if found else 0
            if not 1 <= number <= len(lines) or not lines[number - 1].strip():
                break  # not one line's fault (an unclosed string or array): nothing can be kept
            problems.append(
                f"line {number}: not valid TOML ({exc}); the line is ignored: {show_value(lines[number - 1])}"
            )
            lines[number - 1] = ""
    first = problems[0] if problems else ""
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        first = f"not valid TOML: {exc}; no value of the file is used"
    return {}, [first]


def _checked(data: Mapping[str, Any], problems: list[str]) -> Settings:
    """Settings from parsed tables: every valid value kept, the default for each bad one (named in `problems`)."""
    version = data.get("version", SETTINGS_FORMAT)
    if version != SETTINGS_FORMAT:
        problems.append(
            f"version: this Holodesk reads settings format {SETTINGS_FORMAT}, the file says {show_value(version)}"
            " (written by another Holodesk version?)"
        )
    found = len(problems)
    settings = _build(Settings, data, problems)
    if settings is None or len(problems) > found:
        salvaged: Settings = _salvage(Settings, data)
        return salvaged
    return settings


def settings_from_toml(text: str, path: Path) -> Settings:
    """Parse and check a settings file's text; SettingsError lists every problem with `path`."""
    settings, problems = _settings_and_problems(text)
    if problems:
        raise SettingsError(path, problems)
    return settings


def _settings_and_problems(text: str) -> tuple[Settings, list[str]]:
    """The settings a file's text gives, keeping every valid value, and every problem (empty: none)."""
    try:
        data, problems = _parse_leniently(text)
    except RecursionError:  # arrays or tables nested hundreds deep exhaust tomllib's recursion
        return Settings(), ["nested too deeply to read (arrays or tables inside one another)"]
    return _checked(data, problems), problems


def _to_toml_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def _to_table(section: _Section) -> dict[str, Any]:
    table: dict[str, Any] = {}
    nested = _sections(type(section))
    for f in fields(section):  # type: ignore[arg-type]
        value = getattr(section, f.name)
        if f.name in nested:
            table[f.name] = _to_table(value)
        elif value is not None:  # TOML has no null: an absent key means "not set"
            table[f.name] = _to_toml_value(value)
    return table


TOML_HEADER = """\
# Holodesk settings (format {version}). Edit while Holodesk is not running, or use its settings window.
# The remote server's API key is not stored here: it is in the OS keyring or HOLODESK_API_KEY.
"""


def settings_to_toml(settings: Settings) -> str:
    """The file's text for `settings`; every value is written, except ones that are not set."""
    return TOML_HEADER.format(version=SETTINGS_FORMAT) + tomli_w.dumps(
        {"version": SETTINGS_FORMAT, **_to_table(settings)}
    )


def read_settings(path: Path | None = None) -> Settings:
    """The settings in `path` (default: settings_path()); the defaults when there is no file yet.

    SettingsError (path + every problem) when the file cannot be read, is not TOML or has bad values.
    """
    path = path if path is not None else settings_path()
    text = _read_text(path)
    return Settings() if text is None else settings_from_toml(text, path)


def _read_text(path: Path) -> str | None:
    """The file's text; None when there is none. SettingsError for what cannot be a settings file.

    Never blocks and never reads without bound: a FIFO, a device (a link to /dev/zero) or a huge
    file is refused, and a link to nothing is said to be one (not taken for "no file yet").
    """
    if path.is_symlink() and not path.exists():
        raise SettingsError(path, [f"is a link to {os.readlink(path)}, which does not exist"])
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SettingsError(path, [f"cannot be read: {exc.strerror or exc}"]) from None
    try:
        mode = os.fstat(descriptor).st_mode
        if stat.S_ISDIR(mode):
            raise SettingsError(path, ["cannot be read: it is a folder"])
        if not stat.S_ISREG(mode):
            raise SettingsError(path, ["is not a regular file (a pipe or a device): it is not read"])
        raw = os.read(descriptor, MAX_SETTINGS_BYTES + 1)
    except OSError as exc:
        raise SettingsError(path, [f"cannot be read: {exc.strerror or exc}"]) from None
    finally:
        os.close(descriptor)
    if len(raw) > MAX_SETTINGS_BYTES:
        raise SettingsError(path, [f"is larger than {MAX_SETTINGS_BYTES // 1024} KiB: not a settings file"])
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SettingsError(path, [f"is not UTF-8 text (byte {exc.start})"]) from None


@dataclass(frozen=True, slots=True)
class LoadedSettings:
    """What the app starts with: the settings to use, where they came from, and the file's problems if any.

    With problems, `settings` keep every valid value of the file and the default for each key that a
    problem names (all defaults only when the file cannot be read at all); the file is left untouched.
    """

    settings: Settings
    path: Path
    problem: SettingsError | None = None


def load_settings(path: Path | None = None) -> LoadedSettings:
    """Read the settings without ever raising for a bad file: what can be kept + the problems instead."""
    path = path if path is not None else settings_path()
    try:
        text = _read_text(path)
    except SettingsError as problem:
        return LoadedSettings(Settings(), path, problem)
    if text is None:
        return LoadedSettings(Settings(), path)
    try:
        settings, problems = _settings_and_problems(text)
    except (RecursionError, ValueError, RuntimeError) as exc:  # a case the checks above missed: still start
        return LoadedSettings(Settings(), path, SettingsError(path, [f"cannot be used ({type(exc).__name__}: {exc})"]))
    return LoadedSettings(settings, path, SettingsError(path, problems) if problems else None)


def save_settings(settings: Settings, path: Path | None = None, *, replace_broken: bool = False) -> Path | None:
    """Write `settings` atomically. Returns the backup of a broken file it replaced, else None.

    The file on disk is checked first: if it is broken, BrokenSettingsFileError, unless the user
    chose `replace_broken=True`; then the broken file is copied to settings.toml.broken-<time> first.
    """
    path = path if path is not None else settings_path()
    if path.is_symlink():
        # The user keeps the file elsewhere (a dotfiles repository): write to it, keep the link.
        path = Path(os.path.realpath(path))
    backup: Path | None = None
    try:
        read_settings(path)
    except SettingsError as problem:
        if not replace_broken:
            raise BrokenSettingsFileError(
                path,
                [
                    *problem.problems,
                    "not saved, so the file stays as it is: fix it, or choose to replace it"
                    " (a copy of the broken file is kept)",
                ],
            ) from None
        if path.exists():
            backup = _backup_path(path)
            shutil.copy2(path, backup)
    write_atomically(path, settings_to_toml(settings).encode("utf-8"))
    return backup


def _backup_path(path: Path) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = path.with_name(f"{path.name}.broken-{stamp}")
    counter = 1
    while candidate.exists():
        counter += 1
        candidate = path.with_name(f"{path.name}.broken-{stamp}-{counter}")
    return candidate


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one, never a mix.

    The temp file is in the same folder (os.replace is atomic only within one file system) and is
    removed if anything fails; the new file is private to the user (mode 0600).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(descriptor, "wb") as temp:
            temp.write(data)
            temp.flush()
            os.fsync(temp.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp_name)
        raise
    _fsync_folder(path.parent)


def _fsync_folder(folder: Path) -> None:
    # Makes the rename itself durable on POSIX; Windows cannot open folders this way, and does not need to.
    if os.name != "posix":
        return
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


# ---------------------------------------------------------------------------------------------------
# The API key of the settings' remote server, kept in the OS keyring through inference.secrets.


def _remote_url(settings: Settings) -> str:
    url = settings.model.remote.base_url
    if url is None:
        raise SettingValueError("model.remote.base_url", "set the server's URL first: keys are stored per server host")
    return url


def store_api_key(settings: Settings, key: str) -> None:
    """Store the API key for the settings' remote server in the OS keyring (KeyringError if it refuses)."""
    secrets.store_api_key(_remote_url(settings), key)


def delete_api_key(settings: Settings) -> bool:
    """Forget the stored key for the settings' remote server; True if one was stored."""
    return secrets.delete_api_key(_remote_url(settings))


def find_api_key(settings: Settings) -> secrets.ApiKeyLookup:
    """Whether a key is available for the settings' remote server, and from where (env or keyring)."""
    return secrets.find_api_key(_remote_url(settings))


__all__ = [
    "BACKENDS",
    "DEFAULT_CHECKPOINT",
    "DEFAULT_PROMPT_HOTKEY",
    "DEVICES",
    "SETTINGS_FORMAT",
    "ApprovalSettings",
    "BrokenSettingsFileError",
    "HotkeySettings",
    "LoadedSettings",
    "LocalModelSettings",
    "ModelSettings",
    "RemoteModelSettings",
    "RunSettings",
    "SessionSettings",
    "SettingValueError",
    "Settings",
    "SettingsError",
    "StopGesture",
    "delete_api_key",
    "find_api_key",
    "load_settings",
    "normalize_server_url",
    "read_settings",
    "save_settings",
    "settings_from_toml",
    "settings_path",
    "settings_to_toml",
    "store_api_key",
    "validate_hotkey",
    "write_atomically",
]
