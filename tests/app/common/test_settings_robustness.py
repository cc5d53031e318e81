"""Settings files that once crashed start-up now run on defaults with the problem named; saving keeps links."""

from __future__ import annotations

import os
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


REMOTE = '[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "http://gpu-box:8000/v1"\nmodel = "holotron"\n'


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("[run]\nmax_steps = -5\nmonitor = 2\n", "run.max_steps: expected a whole number from 1 to 1000, got -5"),
        ("[run]\nmax_steps = 5 steps\nmonitor = 2\n", "line 9: not valid TOML"),
    ],
    ids=["a bad value", "a line that is not TOML"],
)
def test_one_bad_setting_keeps_every_other_value(tmp_path: Path, bad: str, named: str) -> None:
    """A remote-server user's typo in the step limit must not send the app to the local 25 GB model."""
    path = tmp_path / "settings.toml"
    path.write_text(REMOTE + "\n" + bad, encoding="utf-8")

    loaded = load_settings(path)

    assert loaded.settings.model.backend == "remote"
    assert loaded.settings.model.remote.base_url == "http://gpu-box:8000/v1"
    assert loaded.settings.model.remote.model == "holotron"
    assert loaded.settings.run.monitor == 2  # the good value next to the bad one
    assert loaded.settings.run.max_steps == Settings().run.max_steps  # the bad one: its default
    assert loaded.problem is not None and len(loaded.problem.problems) == 1
    assert named in loaded.problem.problems[0]


def test_a_remote_backend_whose_url_is_bad_keeps_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(
        '[model]\nbackend = "remote"\nprofile = "holotron"\n\n[model.remote]\nbase_url = "ftp://x"\n'
        "\n[run]\nmax_steps = 7\n",
        encoding="utf-8",
    )
    loaded = load_settings(path)
    assert loaded.settings.run.max_steps == 7
    assert loaded.problem is not None and "model.remote.base_url" in str(loaded.problem)


def test_a_fifo_a_device_and_a_dangling_link_are_problems_in_words(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)  # nobody writes: reading it would block the app for ever
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")  # endless: reading it all would exhaust memory
    dangling = tmp_path / "dangling.toml"
    dangling.symlink_to(tmp_path / "moved-away.toml")
    for path, words in (
        (fifo, "not a regular file"),
        (zero, "not a regular file"),
        (dangling, "moved-away.toml, which does not exist"),
    ):
        loaded = load_settings(path)
        assert loaded.settings == Settings()
        assert loaded.problem is not None and words in str(loaded.problem), (path, loaded.problem)


def test_a_huge_file_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "settings.toml"
    path.write_bytes(b"# " + b"x" * (2 * 1024 * 1024) + b"\n")
    loaded = load_settings(path)
    assert loaded.problem is not None and "larger than 1024 KiB" in str(loaded.problem)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://gpu-box\x1b[2J:8000/v1", "no spaces or control characters"),
        ("http://gpu\u202ebox:8000/v1", "no spaces or control characters"),
        ("http://" + "a" * 100_000 + ":8000/v1", "at most 2000 characters"),
        ("http://" + "a" * 70 + ".example:8000/v1", "longer than a host name can be"),
        ("https://alice:hunter2@gpu-box:8000/v1", "carries a user name or password"),
    ],
    ids=["escape", "bidi", "100k host", "long label", "credentials"],
)
def test_a_server_url_that_cannot_work_is_refused_in_words_without_its_secrets(
    tmp_path: Path, url: str, words: str
) -> None:
    path = tmp_path / "settings.toml"
    path.write_text(f'[model.remote]\nbase_url = "{url.replace(chr(0x1b), chr(92) + "u001b")}"\n', encoding="utf-8")
    problem = load_settings(path).problem
    assert problem is not None and words in str(problem), str(problem)
    assert "hunter2" not in str(problem) and "alice" not in str(problem)
    assert "\x1b" not in str(problem) and "\u202e" not in str(problem)
    assert len(str(problem)) < 600
