"""Holodesk's user settings: reading and writing settings.toml, and the names the rest of the app imports.

The file is `<user config folder>/holodesk/settings.toml` (platformdirs; ~/.config/holodesk on
Linux). Its format, every table and key with its type, default and allowed values, is documented
in docs/settings.md, which is generated from the schema (settings_schema.py). No Qt here. The parts:

- settings_schema.py: every table and key, described once; settings_checks.py: the value checkers.
- settings_model.py: the frozen dataclasses (`Settings`), which check themselves on construction, so
  a `Settings` cannot hold an invalid value (`dataclasses.replace` is checked as well).
- settings_toml.py: text to `Settings` and back; every problem is reported at once, each naming its
  key and the bad value; unknown keys are problems too. settings_salvage.py: what a broken file gives.
- settings_keyring.py: the remote server's API key, which lives in the OS keyring or HOLODESK_API_KEY
  (`inference.secrets`), never in the file; an `api_key` written into the file is refused, and its
  value is never echoed.
- Here, the file itself:
  - `load_settings()` never raises for a bad file: it returns the file's valid values, the default
    for each bad one (a line that is not valid TOML costs only that line), together with a
    `SettingsError` (path + a problem per key) so the app can run and show what is wrong.
  - Only a regular file is read, and at most 1 MiB of it: a FIFO, a link to a device or to nothing
    is a problem said in words, never a hang or a crash.
  - A broken file is never overwritten behind the user's back: `save_settings()` refuses with
    `BrokenSettingsFileError` while the file on disk is broken. Replacing it is an explicit choice,
    `replace_broken=True`, and even then a copy is kept first (settings.toml.broken-<time>).
  - Writes are atomic: a temp file in the same folder, fsync, os.replace, so a crash leaves either
    the old file or the new one.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from holodesk.app.common.choices import BACKENDS, DEVICES
from holodesk.app.common.settings_checks import normalize_server_url, validate_hotkey
from holodesk.app.common.settings_keyring import delete_api_key, find_api_key, store_api_key
from holodesk.app.common.settings_model import (
    ApprovalSettings,
    BrokenSettingsFileError,
    HotkeySettings,
    LocalModelSettings,
    ModelSettings,
    RemoteModelSettings,
    RunSettings,
    SessionSettings,
    Settings,
    SettingsError,
    SettingValueError,
    StopGesture,
)
from holodesk.app.common.settings_schema import DEFAULT_CHECKPOINT, SETTINGS_FORMAT
from holodesk.app.common.settings_toml import settings_and_problems, settings_from_toml, settings_to_toml
from holodesk.automation.hotkey_syntax import DEFAULT_PROMPT_HOTKEY

SETTINGS_FILE_NAME = "settings.toml"
MAX_SETTINGS_BYTES = 1024 * 1024  # a settings file is a few hundred bytes; more is not one


def settings_path() -> Path:
    """The settings file: <user config folder>/holodesk/settings.toml (~/.config/holodesk on Linux)."""
    from platformdirs import user_config_path

    return user_config_path("holodesk", appauthor=False) / SETTINGS_FILE_NAME


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
        settings, problems = settings_and_problems(text)
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
    except BaseException:  # the temp file goes on any way out, Ctrl+C too; re-raised
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
