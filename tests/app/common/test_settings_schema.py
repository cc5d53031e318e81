"""The settings schema is the one description of the file: the dataclasses, the reader and the writer know
exactly its keys, take their checks and defaults from it, and docs/settings.md is what it generates."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from holodesk.app.common import settings_docs, settings_schema
from holodesk.app.common.settings import Settings, SettingsError, load_settings, settings_from_toml, settings_to_toml
from holodesk.app.common.settings_schema import KEYS, TABLES, Key, Table

COMMITTED_DOCS = Path(__file__).resolve().parents[3] / "docs" / "settings.md"


def dataclass_keys(cls: type, table: str = "") -> Iterator[tuple[str, type, str]]:
    """(dotted key, its dataclass, field name) for every setting the dataclasses hold, nested tables walked."""
    for field in dataclasses.fields(cls):
        factory = field.default_factory
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            yield from dataclass_keys(factory, f"{table}.{field.name}" if table else field.name)
        else:
            yield f"{table}.{field.name}", cls, field.name


def flatten(table: Mapping[str, Any], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, value in table.items():
        dotted = f"{prefix}.{name}" if prefix else name
        keys |= flatten(value, dotted) if isinstance(value, Mapping) else {dotted}
    return keys


def test_the_dataclasses_hold_exactly_the_schemas_keys_with_its_checks_and_defaults() -> None:
    known = {dotted: (cls, name) for dotted, cls, name in dataclass_keys(Settings)}
    assert set(known) == set(KEYS), (
        f"only in the dataclasses: {sorted(set(known) - set(KEYS))};"
        f" only in the schema: {sorted(set(KEYS) - set(known))}"
    )
    defaults = Settings()
    for dotted, (cls, name) in known.items():
        key = KEYS[dotted]
        assert cls.CHECKS[name] is key.check, f"{dotted} is not checked by the schema's check"  # type: ignore[attr-defined]
        value: Any = defaults
        for part in dotted.split("."):
            value = getattr(value, part)
        expected = key.default_factory() if key.default_factory is not None else key.default
        assert value == expected, f"{dotted} defaults to {value!r}, the schema says {expected!r}"


def every_key_set(folder: Path) -> str:
    """A settings file that sets every key the schema names, each to a valid value other than `None`."""
    values: dict[str, object] = {
        "model.backend": "remote",
        "model.script": str(folder / "answers.jsonl"),
        "model.remote.base_url": "http://gpu-box:8000/v1",
        "model.remote.model": "holotron",
        "sessions.folder": str(folder / "sessions"),
    }
    chosen = {dotted: values.get(dotted, key.default) for dotted, key in KEYS.items()}
    document = {"version": 1, **nested({k: sorted(v) if isinstance(v, frozenset) else v for k, v in chosen.items()})}
    return tomli_w.dumps(document)


def test_the_reader_and_the_writer_know_every_schema_key_and_no_other(tmp_path: Path) -> None:
    text = every_key_set(tmp_path)
    settings = settings_from_toml(text, tmp_path / "settings.toml")  # raises SettingsError for an unknown key
    written = tomllib.loads(settings_to_toml(settings))
    assert flatten(written) - {"version"} == set(KEYS)

    with pytest.raises(SettingsError) as refused:
        settings_from_toml(text + "surprise = 1\n", tmp_path / "settings.toml")
    assert refused.value.problems == ("unknown key 'sessions.surprise' (known here: folder, retention_mb)",), (
        "a key the schema lacks must be refused by name"
    )


def test_the_committed_docs_are_the_generated_ones() -> None:
    assert COMMITTED_DOCS.read_text(encoding="utf-8") == settings_docs.render(), (
        "docs/settings.md differs from the settings schema: run python -m holodesk.app.common.settings_docs"
    )


def test_a_key_added_to_the_schema_without_regenerating_fails_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "settings.md"
    page.write_text(COMMITTED_DOCS.read_text(encoding="utf-8"), encoding="utf-8")
    assert settings_docs.main(["--check", "--output", str(page)]) == 0

    run = next(table for table in TABLES if table.name == "run")
    grown = Table(
        run.name,
        run.meaning,
        (*run.keys, Key("pause_s", settings_schema.KEYS["hotkeys.stop.within_s"].check, "A new key.", default=1.0)),
    )
    monkeypatch.setattr(settings_docs, "TABLES", tuple(grown if table is run else table for table in TABLES))
    assert settings_docs.main(["--check", "--output", str(page)]) == 1
    assert "differs from the settings schema" in capsys.readouterr().err

    assert settings_docs.main(["--output", str(page)]) == 0
    assert "| `pause_s` | number (seconds) | `1.0` | 0.1 to 3 | A new key. |" in page.read_text(encoding="utf-8")
    assert settings_docs.main(["--check", "--output", str(page)]) == 0


def test_the_docs_describe_each_key_with_its_schema_words() -> None:
    page = settings_docs.render()
    assert "| `max_steps` | whole number | `30` | 1 to 1000 | The most steps a task may take. |" in page, (
        "run.max_steps' row"
    )
    for table in TABLES:
        section = page.split(f"## [{table.name}]\n", 1)[1].split("\n## ", 1)[0]
        for key in table.keys:
            assert f"| `{key.name}` | {key.check.kind} |" in section, f"{table.name}.{key.name} is not in its table"


def test_the_generator_runs_as_a_module_and_says_when_it_cannot_read_the_page(tmp_path: Path) -> None:
    current = subprocess.run(
        [sys.executable, "-m", "holodesk.app.common.settings_docs", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (current.returncode, current.stdout.strip()) == (0, f"{COMMITTED_DOCS} is current"), current.stderr

    missing = tmp_path / "nowhere" / "settings.md"
    absent = subprocess.run(
        [sys.executable, "-m", "holodesk.app.common.settings_docs", "--check", "--output", str(missing)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert absent.returncode == 1
    assert absent.stderr.strip() == f"{missing}: cannot be read: No such file or directory"


def test_every_rule_across_keys_names_schema_keys_and_is_enforced_by_name(tmp_path: Path) -> None:
    rules = [(table, rule) for table in TABLES for rule in table.rules]
    assert rules, "the schema states the model table's rules"
    for table, rule in rules:
        assert {rule.key, rule.needed} <= set(KEYS), rule
        text = tomli_w.dumps({"version": 1, **nested({rule.key: rule.value})})
        with pytest.raises(SettingsError) as refused:
            settings_from_toml(text, tmp_path / "settings.toml")
        assert refused.value.problems == (
            f"{rule.needed}: not set, but {rule.key} = {rule.value!r} needs {rule.why}",
        ), f"[{table.name}]'s rule {rule.words()}"


def nested(values: Mapping[str, object]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for dotted, value in values.items():
        *tables, name = dotted.split(".")
        table = document
        for part in tables:
            table = table.setdefault(part, {})
        table[name] = value
    return document


def test_a_broken_rule_defaults_only_the_key_it_looks_at(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[model]\nbackend = "remote"\nprofile = "holo1.5"\nscript = "/answers.jsonl"\n[run]\nmax_steps = 7\n',
        encoding="utf-8",
    )
    loaded = load_settings(path)
    assert loaded.problem is not None
    assert loaded.problem.problems == (
        "model.remote.base_url: not set, but model.backend = 'remote' needs the server's URL",
    )
    model = loaded.settings.model
    assert (model.backend, model.profile, model.script, loaded.settings.run.max_steps) == (
        "local",
        "holo1.5",
        Path("/answers.jsonl"),
        7,
    ), "the file's other values are kept; only model.backend, which the rule looks at, is defaulted"
