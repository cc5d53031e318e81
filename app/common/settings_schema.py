"""Every settings table and key, described once: its type, default, allowed values and meaning.

The settings dataclasses (settings_model.py) take their defaults and their per-key checks from here, and
docs/settings.md is generated from here (`python -m holodesk.app.common.settings_docs`), so the file
format a person edits by hand, the values Holodesk accepts and the words that document them cannot
drift apart. tests/app/common/test_settings_schema.py checks the dataclasses know exactly these keys
and that the committed docs are the generated ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from holodesk.app.common import settings_checks as checks
from holodesk.app.common.choices import BACKENDS, DEVICES
from holodesk.automation.engine_protocols import DEFAULT_MAX_STEPS
from holodesk.automation.hotkey_syntax import DEFAULT_PROMPT_HOTKEY
from holodesk.automation.trajectory import default_root
from holodesk.inference.checkpoint import DEFAULT_REPO_ID
from holodesk.inference.profiles import DEFAULT_PROFILE

SETTINGS_FORMAT = 1  # the file's top-level `version`; bump it with a migration when the layout changes
SCREENSHOT_WINDOWS = ("trained", "block")
DEFAULT_CHECKPOINT = DEFAULT_REPO_ID
MAX_STEPS_LIMIT = 1000
DEFAULT_RETENTION_MB = 2048
STOP_PRESSES_RANGE = (1, 5)
STOP_WINDOW_RANGE_S = (0.1, 3.0)
# Keys that look like secrets: refused in the file, and their values are never repeated in messages.
SECRET_KEY_NAMES = frozenset({"api_key", "apikey", "key_value", "token", "password", "secret"})


@dataclass(frozen=True, slots=True)
class Key:
    """One setting. `default` is its value when the file leaves it out (None: not set); a default that
    depends on the machine has `default_factory` instead, and `default_words` say it for the docs."""

    name: str
    check: checks.Check
    meaning: str
    default: object = None
    default_factory: Callable[[], object] | None = None
    default_words: str | None = None


@dataclass(frozen=True, slots=True)
class Requires:
    """A rule across keys: `key` set to `value` needs `needed` set (`why` says what it is, in the error)."""

    key: str
    value: str
    needed: str
    why: str

    def words(self) -> str:
        """The rule as docs/settings.md states it."""
        return f'`{self.key} = "{self.value}"` needs `{self.needed}`: {self.why}.'


@dataclass(frozen=True, slots=True)
class Table:
    """One TOML table: `name` dotted as the file writes it ("model.local"), its keys, and the rules
    that involve several keys (the dataclass checks them, the docs state them)."""

    name: str
    meaning: str
    keys: tuple[Key, ...]
    rules: tuple[Requires, ...] = ()


TABLES: tuple[Table, ...] = (
    Table(
        "model",
        "Where the model runs and how Holodesk talks to it.",
        (
            Key(
                "backend",
                checks.choice(BACKENDS),
                "`local`: the in-process engine; `remote`: an OpenAI-compatible server (vLLM); `scripted`: answers read"
                " from a file (demos and tests).",
                default="local",
            ),
            Key("profile", checks.PROFILE, "The model family's prompt and answer format.", default=DEFAULT_PROFILE),
            Key("script", checks.OPTIONAL_FILE, "The scripted backend's JSONL file of model answers."),
        ),
        rules=(
            Requires("model.backend", "remote", "model.remote.base_url", "the server's URL"),
            Requires("model.backend", "scripted", "model.script", "a JSONL file of answers"),
        ),
    ),
    Table(
        "model.local",
        "The in-process backend: which checkpoint and where it runs.",
        (
            Key(
                "checkpoint",
                checks.TEXT,
                "A checkpoint folder or a Hugging Face repo id.",
                default=DEFAULT_CHECKPOINT,
            ),
            Key("device", checks.choice(DEVICES), "Where the model runs.", default="cuda"),
            Key(
                "screenshot_window",
                checks.choice(SCREENSHOT_WINDOWS),
                "`trained`: the last 3 screenshots, as the model was trained; `block`: old screenshots leave three at"
                " a time, so the kept state serves more steps, but the model then sees 1 to 3 screenshots.",
                default="trained",
            ),
        ),
    ),
    Table(
        "model.remote",
        "An OpenAI-compatible server (vLLM). Its API key is in the OS keyring or `HOLODESK_API_KEY`, never here.",
        (
            Key("base_url", checks.SERVER_URL, "The server's URL, e.g. `http://gpu-box:8000/v1`."),
            Key("model", checks.OPTIONAL_TEXT, "The served model's name; absent: the one model the server lists."),
        ),
    ),
    Table(
        "hotkeys",
        "Global keys.",
        (Key("prompt", checks.HOTKEY, "Opens the task prompt.", default=DEFAULT_PROMPT_HOTKEY),),
    ),
    Table(
        "hotkeys.stop",
        "The kill switch: `key` pressed `presses` times within `within_s` seconds ends a run.",
        (
            Key("key", checks.SINGLE_KEY, "The key to press.", default="<esc>"),
            Key("presses", checks.whole_number(*STOP_PRESSES_RANGE), "How many presses.", default=2),
            Key("within_s", checks.seconds(*STOP_WINDOW_RANGE_S), "Within how many seconds.", default=0.5),
        ),
    ),
    Table(
        "run",
        "How a task runs.",
        (
            Key("monitor", checks.MONITOR, "The monitor the model sees.", default=1),
            Key(
                "max_steps",
                checks.whole_number(1, MAX_STEPS_LIMIT),
                "The most steps a task may take.",
                default=DEFAULT_MAX_STEPS,
            ),
        ),
    ),
    Table(
        "approval",
        "Action kinds that run without asking.",
        (
            Key(
                "auto_approve",
                checks.ACTION_KINDS,
                "Kinds of action performed without the approval panel; empty: every step is approved by hand.",
                default=frozenset(),
            ),
        ),
    ),
    Table(
        "sessions",
        "Where runs are recorded, and how much disk they may use.",
        (
            Key(
                "folder",
                checks.ABSOLUTE_FOLDER,
                "The folder trajectories are recorded in.",
                default_factory=default_root,
                default_words="`holodesk/sessions` in the user data folder (`~/.local/share/holodesk/sessions`"
                " on Linux)",
            ),
            Key(
                "retention_mb",
                checks.whole_number(1, None),
                "Megabytes the recordings may use before the oldest are pruned.",
                default=DEFAULT_RETENTION_MB,
            ),
        ),
    ),
)

_TABLES: Mapping[str, Table] = MappingProxyType({table.name: table for table in TABLES})
KEYS: Mapping[str, Key] = MappingProxyType({f"{table.name}.{key.name}": key for table in TABLES for key in table.keys})

# The keys a rule looks at: salvage defaults them when the rule fails, keeping the other values.
RULE_KEYS = frozenset(rule.key for table in TABLES for rule in table.rules)


def checks_of(table: str) -> Mapping[str, Callable[[Any], Any]]:
    """The checker of each key of `table`, by key name (a settings dataclass's CHECKS)."""
    return MappingProxyType({key.name: key.check for key in _TABLES[table].keys})


def rules_of(table: str) -> tuple[Requires, ...]:
    """The rules across keys that `table`'s dataclass checks."""
    return _TABLES[table].rules


def default_of(dotted: str) -> Any:
    """The default of one key ("run.max_steps"), for the dataclass field it fills."""
    key = KEYS[dotted]
    if key.default_factory is not None:
        raise ValueError(f"{dotted} has a default that depends on the machine: use default_factory_of")
    return key.default


def default_factory_of(dotted: str) -> Callable[[], Any]:
    """The function that makes a machine-dependent default ("sessions.folder")."""
    factory = KEYS[dotted].default_factory
    if factory is None:
        raise ValueError(f"{dotted} has a plain default: use default_of")
    return factory
