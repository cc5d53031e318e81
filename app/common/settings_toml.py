"""TOML in and out: the settings file's text to a checked `Settings` and every problem, and back.

Reading keeps going past what is wrong: a line that is not valid TOML costs only that line, and each
bad value is one problem naming its key; unknown keys and secrets (an `api_key`) are problems too.
Writing puts every set value, under the format's `version`, behind a short header.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

import tomli_w

from holodesk.app.common.settings_checks import InvalidValue, show_value
from holodesk.app.common.settings_model import (
    Section,
    Settings,
    SettingsError,
    SettingValueError,
    dotted_key,
    sections_of,
)
from holodesk.app.common.settings_salvage import salvage
from holodesk.app.common.settings_schema import SECRET_KEY_NAMES, SETTINGS_FORMAT
from holodesk.inference import secrets

MAX_BAD_LINES = 20  # TOML lines skipped before giving up on the whole file
_ERROR_LINE = re.compile(r"at line (\d+)")


def _build(cls: type[Section], data: Mapping[str, Any], problems: list[str]) -> Any:
    """A `cls` from a TOML table, or None after adding every problem found (each naming its key)."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    sections = sections_of(cls)
    values: dict[str, Any] = {}
    found_before = len(problems)
    for name, raw in data.items():
        key = dotted_key(cls.TABLE, name)
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
        salvaged: Settings = salvage(Settings, data)
        return salvaged
    return settings


def settings_from_toml(text: str, path: Path) -> Settings:
    """Parse and check a settings file's text; SettingsError lists every problem with `path`."""
    settings, problems = settings_and_problems(text)
    if problems:
        raise SettingsError(path, problems)
    return settings


def settings_and_problems(text: str) -> tuple[Settings, list[str]]:
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


def _to_table(section: Section) -> dict[str, Any]:
    table: dict[str, Any] = {}
    nested = sections_of(type(section))
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
