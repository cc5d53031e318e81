"""The settings' value checkers: each takes what TOML (or Python code) gives and returns the typed value.

A checker raises `InvalidValue` with the complaint about the value alone; the caller knows the key
and names it (`run.max_steps: expected ...`: settings_model.py, settings_toml.py). `Check` pairs a
checker with the words docs/settings.md shows for it (its type and its allowed values), so the
schema (settings_schema.py) describes each key once and both the validation and the docs come from it.
Also here: `normalize_server_url`, shared by the settings window, the file and the command line.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from holodesk.app.common.errors import HolodeskAppError
from holodesk.automation.actions import ACTION_TYPES
from holodesk.automation.display_text import safe_text
from holodesk.automation.hotkey_syntax import HotkeySyntaxError, check_hotkey, key_part
from holodesk.inference.profiles import PROFILE_NAMES, UnknownProfileError, canonical_profile_name

MAX_URL_CHARS = 2000
MAX_HOST_CHARS = 253  # DNS: 253 characters, 63 a label


class InvalidValue(HolodeskAppError, ValueError):
    """A checker's complaint about one value, before the key is known."""


@dataclass(frozen=True, slots=True)
class Check:
    """A checker and how docs/settings.md describes what it takes: `kind` (the TOML type) and `allowed`."""

    kind: str
    allowed: str
    check: Callable[[object], Any]

    def __call__(self, value: object) -> Any:
        return self.check(value)


def show_value(value: object) -> str:
    text = repr(str(value) if isinstance(value, Path) else value)
    return text if len(text) <= 80 else text[:77] + "..."


def _choice(options: tuple[str, ...]) -> Callable[[object], str]:
    def check(value: object) -> str:
        if value not in options:
            raise InvalidValue(f"expected one of {', '.join(repr(o) for o in options)}, got {show_value(value)}")
        return str(value)

    return check


def _text(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidValue(f"expected non-empty text, got {show_value(value)}")
    if value != value.strip():
        raise InvalidValue(f"has spaces at its start or end: {show_value(value)}")
    return value


def _optional_text(value: object) -> str | None:
    return None if value is None else _text(value)


def _whole_number(low: int, high: int | None) -> Callable[[object], int]:
    def check(value: object) -> int:
        # bool is an int in Python; `max_steps = true` is a mistake, not 1.
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidValue(f"expected a whole number, got {show_value(value)}")
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise InvalidValue(f"expected a whole number {bounds}, got {value}")
        return value

    return check


def _seconds(low: float, high: float) -> Callable[[object], float]:
    def check(value: object) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            raise InvalidValue(f"expected a number of seconds, got {show_value(value)}")
        if not low <= value <= high:
            raise InvalidValue(f"expected {low:g} to {high:g} seconds, got {value:g}")
        return float(value)

    return check


def _profile(value: object) -> str:
    try:
        return canonical_profile_name(value)  # type: ignore[arg-type]
    except UnknownProfileError as exc:
        raise InvalidValue(str(exc)) from None


def normalize_server_url(text: str) -> str:
    """A model server's URL as Holodesk uses it, from what a person types (settings window, file, CLI).

    "gpu-box:8000" becomes "http://gpu-box:8000/v1": no scheme means http://, no path means the
    OpenAI-compatible root /v1 (as inference.remote does); a trailing slash goes. ValueError when it
    cannot be a server URL (another scheme, no host, spaces).
    """
    url = text.strip()
    shown = _url_in_words(url)
    if len(url) > MAX_URL_CHARS:
        raise ValueError(f"a server URL is at most {MAX_URL_CHARS} characters; this one has {len(url)}: {shown}")
    if any(unicodedata.category(c) in ("Cc", "Cf") or c.isspace() for c in url):
        raise ValueError(f"a server URL has no spaces or control characters: {shown}")
    if "://" not in url:
        url = "http://" + url
    url = url.rstrip("/")
    try:
        parts = urlsplit(url)  # ValueError for "http://[::1" and the like
        _ = parts.port  # a port that is not a number raises here, not later when connecting
    except ValueError:
        raise ValueError(f"not a server URL: {shown}") from None
    if parts.username is not None or parts.password is not None:
        raise ValueError(
            f"the server URL carries a user name or password ({shown}): give it without them; an API key goes "
            "in the settings window's API key field (the OS keyring) or HOLODESK_API_KEY"
        )
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"expected a server URL such as http://gpu-box:8000/v1 or gpu-box:8000, got {shown}")
    if len(parts.hostname) > MAX_HOST_CHARS or any(len(label) > 63 for label in parts.hostname.split(".")):
        raise ValueError(f"the host name is longer than a host name can be: {shown}")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def _url_in_words(url: str) -> str:
    """A URL to quote in a message: credentials hidden, controls escaped, at most 80 characters."""
    scheme, found, rest = url.partition("://")
    head = rest if found else scheme
    authority, slash, path = head.partition("/")
    if "@" in authority:
        authority = "***@" + authority.rsplit("@", 1)[1]
    hidden = f"{scheme}://" if found else ""
    return show_value(safe_text(hidden + authority + slash + path))


def _base_url(value: object) -> str | None:
    if value is None:
        return None
    url = _text(value)
    try:
        return normalize_server_url(url)
    except ValueError as exc:
        raise InvalidValue(f"not a valid URL: {exc}") from None


def _absolute_folder(value: object) -> Path:
    if not isinstance(value, str | Path) or not str(value).strip():
        raise InvalidValue(f"expected a folder path, got {show_value(value)}")
    path = _expand_user(value)
    if not path.is_absolute():
        raise InvalidValue(f"expected an absolute path (or one starting with ~), got {show_value(value)}")
    return path


def _optional_file(value: object) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str | Path) or not str(value).strip():
        raise InvalidValue(f"expected a file path, got {show_value(value)}")
    return _expand_user(value)


def _expand_user(value: str | Path) -> Path:
    """`~` and `~user` expanded; a `~user` that does not exist is a problem to report, not a crash."""
    try:
        return Path(value).expanduser()
    except RuntimeError as exc:  # pathlib: "Could not determine home directory."
        raise InvalidValue(f"cannot expand {show_value(str(value))}: {exc} (no such user?)") from None


def _monitor(value: object) -> int | Literal["all"]:
    if value == "all":
        return "all"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise InvalidValue(f'expected a monitor number from 1, or "all", got {show_value(value)}')


def _action_kinds(value: object) -> frozenset[str]:
    if isinstance(value, str) or not isinstance(value, list | tuple | set | frozenset):
        raise InvalidValue(f'expected a list of action kinds such as ["scroll"], got {show_value(value)}')
    unknown = [kind for kind in value if not isinstance(kind, str) or kind not in ACTION_TYPES]
    if unknown:
        raise InvalidValue(
            f"unknown action kind {show_value(unknown[0])}; the kinds are: {', '.join(ACTION_TYPES)}"
            f" (got {show_value(value)})"
        )
    return frozenset(value)


def _key_part(part: str) -> tuple[str, bool]:
    try:
        return key_part(part)
    except HotkeySyntaxError as exc:
        raise InvalidValue(str(exc)) from None


def validate_hotkey(value: object) -> str:
    """A global hotkey in pynput's GlobalHotKeys syntax ("<ctrl>+<alt>+h"), or ValueError saying what is wrong
    (the rules are `holodesk.automation.hotkey_syntax.check_hotkey`'s)."""
    try:
        return check_hotkey(value)
    except HotkeySyntaxError as exc:
        raise InvalidValue(str(exc)) from None


def _single_key(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidValue(f"expected one key such as '<esc>', got {show_value(value)}")
    if "+" in value[1:]:
        raise InvalidValue(f"expected one key, not a combination, got {value!r}")
    _, is_modifier = _key_part(value)
    if is_modifier:
        raise InvalidValue(
            f"{value!r} is a modifier; the stop key must be a key that can be pressed on its own, e.g. '<esc>'"
        )
    return value


# ---------------------------------------------------------------------------------------------------
# The checks the schema names: each a checker with its words for the docs.


def _quoted(options: tuple[str, ...] | list[str]) -> str:
    return ", ".join(f'`"{option}"`' for option in options)


def choice(options: tuple[str, ...]) -> Check:
    """One of `options`, as written."""
    return Check("text", f"one of {_quoted(options)}", _choice(options))


def whole_number(low: int, high: int | None) -> Check:
    """A whole number in [low, high] (no upper bound when `high` is None); `true` is not 1."""
    bounds = f"{low} to {high}" if high is not None else f"{low} or more"
    return Check("whole number", bounds, _whole_number(low, high))


def seconds(low: float, high: float) -> Check:
    """A finite number of seconds in [low, high]."""
    return Check("number (seconds)", f"{low:g} to {high:g}", _seconds(low, high))


TEXT = Check("text", "not empty, no spaces at the start or end", _text)
OPTIONAL_TEXT = Check("text, or absent", "not empty, no spaces at the start or end", _optional_text)
PROFILE = Check("text", f"a model profile: {_quoted(PROFILE_NAMES)} (case and common spellings forgiven)", _profile)
SERVER_URL = Check(
    "text (URL), or absent",
    "an http or https URL without user or password; no scheme means `http://`, no path means `/v1`"
    ' (`"gpu-box:8000"` is read as `"http://gpu-box:8000/v1"`)',
    _base_url,
)
ABSOLUTE_FOLDER = Check("text (folder path)", "absolute, or starting with `~`", _absolute_folder)
OPTIONAL_FILE = Check("text (file path), or absent", "a path; `~` is expanded", _optional_file)
MONITOR = Check("whole number, or text", 'a monitor number from 1 (as you count them), or `"all"`', _monitor)
ACTION_KINDS = Check("list of text", f"action kinds: {_quoted(list(ACTION_TYPES))}", _action_kinds)
HOTKEY = Check(
    "text",
    'a key combination in pynput\'s syntax joined by +, such as `"<ctrl>+<alt>+h"`: `<ctrl>`, `<alt>` or `<cmd>`'
    " and at least one ordinary key, none twice",
    validate_hotkey,
)
SINGLE_KEY = Check("text", 'one key that can be pressed on its own (not a modifier), such as `"<esc>"`', _single_key)
