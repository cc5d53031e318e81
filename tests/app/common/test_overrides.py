"""Command-line flags on top of the settings file: each flag replaces one value, checked like the file's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from holodesk.app.common.overrides import CommandFlags, FlagError, apply_flags
from holodesk.app.common.settings import ModelSettings, RemoteModelSettings, RunSettings, Settings

REMOTE = dataclasses.replace(
    Settings(),
    model=ModelSettings(backend="remote", remote=RemoteModelSettings(base_url="http://gpu-box:8000/v1", model="m")),
    run=RunSettings(monitor=2, max_steps=7),
)


def test_no_flags_keep_the_file_as_it_is() -> None:
    assert apply_flags(REMOTE, CommandFlags()) == REMOTE


def test_each_given_flag_replaces_one_value() -> None:
    changed = apply_flags(REMOTE, CommandFlags(max_steps=3, monitor="all", profile="holo1"))
    assert (changed.run.max_steps, changed.run.monitor, changed.model.profile) == (3, "all", "holo1")
    assert changed.model.remote == REMOTE.model.remote  # untouched


def test_model_goes_to_the_chosen_backend() -> None:
    remote = apply_flags(REMOTE, CommandFlags(model="served-name"))
    assert remote.model.remote.model == "served-name"
    assert remote.model.local == REMOTE.model.local
    local = apply_flags(REMOTE, CommandFlags(backend="local", model="/data/holotron"))
    assert local.model.local.checkpoint == "/data/holotron"
    assert local.to_policy_options().model == "/data/holotron"
    assert local.to_policy_options().base_url is None


def test_a_flag_is_checked_like_the_file() -> None:
    with pytest.raises(FlagError, match=r"model\.remote\.base_url.*pass --base-url"):
        apply_flags(Settings(), CommandFlags(backend="remote"))
    with pytest.raises(FlagError, match=r"model\.profile.*--profile"):
        apply_flags(Settings(), CommandFlags(profile="gpt-9"))


def test_the_policy_options_follow_the_settings(tmp_path: Path) -> None:
    script = tmp_path / "answers.jsonl"
    options = apply_flags(Settings(), CommandFlags(backend="scripted", script=script)).to_policy_options()
    assert (options.backend, options.script, options.profile) == ("scripted", script, Settings().model.profile)
