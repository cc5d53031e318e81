"""Settings files that once crashed start-up now run on defaults with the problem named; saving keeps links."""

from __future__ import annotations

from pathlib import Path

import pytest

from holodesk.app.common.settings import Settings, load_settings, read_settings, save_settings

HOSTILE_FILES = {
    "arrays nested 1000 deep": ("x = " + "[" * 1000 + "]" * 1000 + "\n", "nested too deeply"),
    "tables nested 1000 deep": ("x = " + "{a = " * 1000 + "1" + "}" * 1000 + "\n", "nested too deeply"),
    "an unclosed IPv6 host": ('[model.remote]\nbase_url = "http://[::1"\n', "model.remote.base_url: not a valid URL"),
    "a port that is not a number": (
        '[model.remote]\nbase_url = "http://gpu-box:80a/v1"\n',
        "model.remote.base_url: not a valid URL",
    ),
    "a home folder of no user": ('[sessions]\nfolder = "~nosuchuser/x"\n', "sessions.folder: cannot expand"),
    "a script of no user": ('[model]\nscript = "~nosuchuser/answers.jsonl"\n', "model.script: cannot expand"),
}


@pytest.mark.parametrize("name", HOSTILE_FILES)
def test_a_hostile_file_runs_on_defaults_with_the_problem_named(tmp_path: Path, name: str) -> None:
    text, fragment = HOSTILE_FILES[name]
    path = tmp_path / "settings.toml"
    path.write_text(text, encoding="utf-8")
    loaded = load_settings(path)
    assert loaded.settings == Settings()
    assert loaded.problem is not None
    assert fragment in str(loaded.problem), str(loaded.problem)
    assert str(path) in str(loaded.problem)
    assert path.read_text(encoding="utf-8") == text  # left as it was


def test_saving_over_a_symlinked_settings_file_writes_through_to_its_target(tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "holodesk.toml"
    target.write_text("[run]\nmax_steps = 12\n", encoding="utf-8")
    link = tmp_path / "config" / "settings.toml"
    link.parent.mkdir()
    link.symlink_to(target)

    settings = read_settings(link)
    assert settings.run.max_steps == 12
    save_settings(Settings(), link)

    assert link.is_symlink() and link.resolve() == target.resolve()
    assert read_settings(target) == Settings()
    assert sorted(p.name for p in link.parent.iterdir()) == ["settings.toml"]  # no temp file left by the link
    assert sorted(p.name for p in dotfiles.iterdir()) == ["holodesk.toml"]
