"""Settings: defaults, the TOML round trip, one specific error per bad value, broken files left alone,
atomic writes, and the API key kept out of the file."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import pytest

from holodesk.app.common.policy_factory import PolicyOptions
from holodesk.app.common.settings import (
    BrokenSettingsFileError,
    LocalModelSettings,
    ModelSettings,
    RemoteModelSettings,
    RunSettings,
    Settings,
    SettingValueError,
    StopGesture,
    find_api_key,
    load_settings,
    read_settings,
    save_settings,
    settings_path,
    store_api_key,
    validate_hotkey,
)
from holodesk.automation.trajectory import default_root


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "settings.toml"


def every_field_changed(folder: Path) -> Settings:
    return Settings(
        model=ModelSettings(
            backend="remote",
            profile="holo1.5",
            script=folder / "answers.jsonl",
            local=LocalModelSettings(checkpoint="/models/Holotron-12B", device="cpu", screenshot_window="block"),
            remote=RemoteModelSettings(base_url="https://gpu-box:8000/v1", model="holotron"),
        ),
        hotkeys=dataclasses.replace(
            Settings().hotkeys,
            prompt="<cmd>+<shift>+<space>",
            stop=StopGesture(key="<f12>", presses=3, within_s=0.8),
        ),
        run=RunSettings(monitor="all", max_steps=12),
        approval=dataclasses.replace(Settings().approval, auto_approve=frozenset({"scroll", "wait"})),
        sessions=dataclasses.replace(Settings().sessions, folder=folder / "sessions", retention_mb=100),
    )


def leaf_values(section: object, prefix: str = "") -> dict[str, object]:
    values: dict[str, object] = {}
    for f in dataclasses.fields(section):  # type: ignore[arg-type]
        value = getattr(section, f.name)
        if dataclasses.is_dataclass(value):
            values |= leaf_values(value, f"{prefix}{f.name}.")
        else:
            values[prefix + f.name] = value
    return values


def test_defaults() -> None:
    settings = Settings()

    assert leaf_values(settings) == {
        "model.backend": "local",
        "model.profile": "holotron",
        "model.script": None,
        "model.local.checkpoint": "Hcompany/Holotron-12B",
        "model.local.device": "cuda",
        "model.local.screenshot_window": "trained",  # the history the model was trained on
        "model.remote.base_url": None,
        "model.remote.model": None,
        "hotkeys.prompt": "<ctrl>+<alt>+h",
        "hotkeys.stop.key": "<esc>",
        "hotkeys.stop.presses": 2,
        "hotkeys.stop.within_s": 0.5,
        "run.monitor": 1,
        "run.max_steps": 30,
        "approval.auto_approve": frozenset(),  # auto-approval is never the default
        "sessions.folder": default_root(),
        "sessions.retention_mb": 2048,
    }
    assert settings.run.capture_monitor == 1
    assert settings.sessions.retention_bytes == 2048 * 1024 * 1024


def test_no_file_means_defaults_and_no_problem_and_nothing_is_written(path: Path) -> None:
    loaded = load_settings(path)

    assert loaded.settings == Settings()
    assert loaded.problem is None
    assert not path.exists()


def test_every_field_round_trips(path: Path, tmp_path: Path) -> None:
    settings = every_field_changed(tmp_path)
    changed = leaf_values(settings)
    defaults = leaf_values(Settings())
    # Guards this test against a new field that it would not cover.
    assert [key for key in changed if changed[key] == defaults[key]] == []

    assert save_settings(settings, path) is None

    assert read_settings(path) == settings
    loaded = load_settings(path)
    assert loaded.problem is None
    assert loaded.settings == settings


@pytest.mark.parametrize("monitor", [1, 2, "all"])
def test_monitor_round_trips(path: Path, monitor: int | str) -> None:
    settings = dataclasses.replace(Settings(), run=RunSettings(monitor=monitor))  # type: ignore[arg-type]

    save_settings(settings, path)

    assert read_settings(path).run.monitor == monitor
    assert read_settings(path).run.capture_monitor == (None if monitor == "all" else monitor)


def test_a_partial_file_fills_in_defaults(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text('[run]\nmax_steps = 5\n\n[model.local]\ndevice = "cpu"\n', encoding="utf-8")

    settings = read_settings(path)

    assert settings == dataclasses.replace(
        Settings(),
        run=RunSettings(max_steps=5),
        model=dataclasses.replace(Settings().model, local=LocalModelSettings(device="cpu")),
    )


# (TOML text, the key the error must name, a fragment of the message: the bad value or the rule)
INVALID = [
    ('[model]\nbackend = "cloud"', "model.backend", "'cloud'"),
    ('[model]\nprofile = "gpt-5"', "model.profile", "'gpt-5'"),
    ('[model.local]\ndevice = "gpu"', "model.local.device", "'gpu'"),
    ('[model.local]\nscreenshot_window = "all"', "model.local.screenshot_window", "'all'"),
    ('[model.local]\ncheckpoint = ""', "model.local.checkpoint", "non-empty"),
    ('[model.remote]\nbase_url = "ftp://gpu-box:8000"', "model.remote.base_url", "'ftp://gpu-box:8000'"),
    ('[model.remote]\nbase_url = "gpu box:8000"', "model.remote.base_url", "'gpu box:8000'"),
    ("[model.remote]\nmodel = 5", "model.remote.model", "5"),
    ('[model]\nbackend = "remote"', "model.remote.base_url", "needs the server's URL"),
    ('[model]\nbackend = "scripted"', "model.script", "JSONL"),
    ("[model]\nscript = 3", "model.script", "3"),
    ('[hotkeys]\nprompt = "<ctrl>+<alt>"', "hotkeys.prompt", "no ordinary key"),
    ('[hotkeys]\nprompt = "h"', "hotkeys.prompt", "fire while typing"),
    ('[hotkeys]\nprompt = "<shift>+h"', "hotkeys.prompt", "fire while typing"),
    ('[hotkeys]\nprompt = "<ctrl>+<hyper>+h"', "hotkeys.prompt", "'<hyper>' is not a key"),
    ('[hotkeys]\nprompt = "<ctrl>+h+H"', "hotkeys.prompt", "twice"),
    ('[hotkeys]\nprompt = "<ctrl>+"', "hotkeys.prompt", "ends with '+'"),
    ("[hotkeys]\nprompt = 7", "hotkeys.prompt", "7"),
    ('[hotkeys.stop]\nkey = "<ctrl>"', "hotkeys.stop.key", "modifier"),
    ('[hotkeys.stop]\nkey = "<ctrl>+q"', "hotkeys.stop.key", "not a combination"),
    ("[hotkeys.stop]\npresses = 0", "hotkeys.stop.presses", "got 0"),
    ("[hotkeys.stop]\npresses = 9", "hotkeys.stop.presses", "got 9"),
    ("[hotkeys.stop]\npresses = true", "hotkeys.stop.presses", "True"),
    ("[hotkeys.stop]\nwithin_s = 0.01", "hotkeys.stop.within_s", "0.01"),
    ('[hotkeys.stop]\nwithin_s = "fast"', "hotkeys.stop.within_s", "'fast'"),
    ("[run]\nmonitor = 0", "run.monitor", "0"),
    ('[run]\nmonitor = "left"', "run.monitor", "'left'"),
    ("[run]\nmonitor = 1.5", "run.monitor", "1.5"),
    ("[run]\nmax_steps = 0", "run.max_steps", "got 0"),
    ("[run]\nmax_steps = 5000", "run.max_steps", "got 5000"),
    ('[run]\nmax_steps = "30"', "run.max_steps", "'30'"),
    ('[approval]\nauto_approve = ["click", "clik"]', "approval.auto_approve", "'clik'"),
    ('[approval]\nauto_approve = "click"', "approval.auto_approve", "'click'"),
    ("[approval]\nauto_approve = [[1]]", "approval.auto_approve", "[1]"),
    ('[sessions]\nfolder = "relative/sessions"', "sessions.folder", "'relative/sessions'"),
    ("[sessions]\nretention_mb = 0", "sessions.retention_mb", "got 0"),
    ("[sessions]\nretention_mb = -5", "sessions.retention_mb", "got -5"),
    ("version = 2", "version", "2"),
    ('model = "local"', "model", "expected a table"),
]


@pytest.mark.parametrize(("text", "key", "fragment"), INVALID, ids=[f"{key}:{text}" for text, key, _ in INVALID])
def test_each_bad_value_gets_an_error_naming_its_key_and_value(path: Path, text: str, key: str, fragment: str) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(text + "\n", encoding="utf-8")

    loaded = load_settings(path)

    assert loaded.settings == Settings()
    assert loaded.problem is not None
    assert loaded.problem.path == path
    [problem] = loaded.problem.problems
    assert problem.startswith(f"{key}:"), problem
    assert fragment in problem
    assert str(path) in str(loaded.problem)


def test_every_problem_is_reported_at_once(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text('[run]\nmax_steps = 0\nmonitor = "left"\n[model.local]\ndevice = "gpu"\n', encoding="utf-8")

    problem = load_settings(path).problem

    assert problem is not None
    assert sorted(line.split(":")[0] for line in problem.problems) == [
        "model.local.device",
        "run.max_steps",
        "run.monitor",
    ]


def test_unknown_keys_are_reported_with_their_full_name(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text('colour = "blue"\n[run]\nmax_step = 3\n[model.lokal]\ndevice = "cpu"\n', encoding="utf-8")

    problem = load_settings(path).problem

    assert problem is not None
    text = "\n".join(problem.problems)
    assert "unknown key 'colour'" in text
    assert "unknown key 'run.max_step' (known here: max_steps, monitor)" in text
    assert "unknown key 'model.lokal'" in text


def test_broken_toml_is_reported_with_the_path_and_left_byte_for_byte(path: Path) -> None:
    path.parent.mkdir(parents=True)
    broken = b'[run]\nmax_steps = 3\nmonitor = "all\n\xe2\x9c\x93 stray text\n'
    path.write_bytes(broken)

    loaded = load_settings(path)

    assert loaded.settings == dataclasses.replace(Settings(), run=RunSettings(max_steps=3))  # line 2 is kept
    assert loaded.problem is not None
    assert loaded.problem.path == path
    assert "not valid TOML" in str(loaded.problem)
    assert "line 3" in str(loaded.problem) and "line 4" in str(loaded.problem)
    with pytest.raises(BrokenSettingsFileError, match="not saved"):
        save_settings(Settings(), path)
    assert path.read_bytes() == broken
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.toml"]


def test_a_file_with_bad_values_is_not_overwritten_either(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text("[run]\nmax_steps = -1\n", encoding="utf-8")
    before = path.read_bytes()

    with pytest.raises(BrokenSettingsFileError) as raised:
        save_settings(Settings(), path)

    assert "run.max_steps" in str(raised.value)
    assert path.read_bytes() == before


def test_replacing_a_broken_file_is_explicit_and_keeps_a_copy(path: Path) -> None:
    path.parent.mkdir(parents=True)
    broken = b"this is [not toml\n"
    path.write_bytes(broken)
    settings = dataclasses.replace(Settings(), run=RunSettings(max_steps=7))

    backup = save_settings(settings, path, replace_broken=True)

    assert backup is not None
    assert backup.parent == path.parent
    assert backup.name.startswith("settings.toml.broken-")
    assert backup.read_bytes() == broken
    assert read_settings(path) == settings


@pytest.mark.parametrize(
    ("content", "fragment"), [(b"\xff\xfe[run]\n", "not UTF-8"), (None, "cannot be read")], ids=["binary", "folder"]
)
def test_unreadable_files_are_problems_too(path: Path, content: bytes | None, fragment: str) -> None:
    if content is None:
        path.mkdir(parents=True)  # a folder where the file should be
    else:
        path.parent.mkdir(parents=True)
        path.write_bytes(content)

    problem = load_settings(path).problem

    assert problem is not None
    assert fragment in str(problem)


def test_saving_leaves_no_temp_files_and_a_private_file(path: Path) -> None:
    save_settings(Settings(), path)
    save_settings(dataclasses.replace(Settings(), run=RunSettings(max_steps=3)), path)

    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.toml"]
    assert read_settings(path).run.max_steps == 3
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_a_crash_during_the_write_keeps_the_old_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    save_settings(dataclasses.replace(Settings(), run=RunSettings(max_steps=3)), path)
    before = path.read_bytes()

    def crash(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="No space left"):
        save_settings(dataclasses.replace(Settings(), run=RunSettings(max_steps=9)), path)
    monkeypatch.undo()

    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["settings.toml"]


def test_settings_live_in_the_user_config_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    expected = tmp_path / "holodesk" / "settings.toml"
    assert settings_path() == expected

    save_settings(dataclasses.replace(Settings(), run=RunSettings(max_steps=4)))

    assert expected.exists()
    assert load_settings().settings.run.max_steps == 4


def test_invalid_settings_cannot_be_built_in_code_either() -> None:
    with pytest.raises(SettingValueError, match=r"run\.max_steps") as raised:
        dataclasses.replace(Settings().run, max_steps=0)
    assert raised.value.key == "run.max_steps"
    with pytest.raises(SettingValueError, match=r"model\.remote\.base_url"):
        ModelSettings(backend="remote")
    # Python sets and "~" folders are normalised the same way the file's values are.
    approval = dataclasses.replace(Settings().approval, auto_approve={"click"})  # type: ignore[arg-type]
    assert approval.auto_approve == frozenset({"click"})
    sessions = dataclasses.replace(Settings().sessions, folder="~/holodesk-sessions")  # type: ignore[arg-type]
    assert sessions.folder == Path.home() / "holodesk-sessions"


@pytest.mark.parametrize(
    "hotkey", ["<ctrl>+<alt>+h", "<Ctrl>+<Alt>+H", "<cmd>+<shift>+<space>", "<ctrl>++", "<alt>+<f4>", "<ctrl>+<65>"]
)
def test_hotkeys_in_pynput_syntax_are_accepted(hotkey: str) -> None:
    assert validate_hotkey(hotkey) == hotkey


def test_to_policy_options_for_each_backend(tmp_path: Path) -> None:
    local = dataclasses.replace(
        Settings(), model=ModelSettings(local=LocalModelSettings(checkpoint="~/models/holotron", device="cpu"))
    )
    assert local.to_policy_options() == PolicyOptions(
        backend="local",
        profile="holotron",
        model=str(Path.home() / "models/holotron"),
        base_url=None,
        device="cpu",
        script=None,
        screenshot_window="trained",
    )

    remote = every_field_changed(tmp_path)
    assert remote.to_policy_options() == PolicyOptions(
        backend="remote",
        profile="holo1.5",
        model="holotron",
        base_url="https://gpu-box:8000/v1",
        device="cpu",
        script=tmp_path / "answers.jsonl",
        screenshot_window="block",
    )

    script = tmp_path / "answers.jsonl"
    scripted = dataclasses.replace(Settings(), model=ModelSettings(backend="scripted", script=script))
    options = scripted.to_policy_options()
    assert (options.backend, options.script, options.model, options.base_url) == ("scripted", script, None, None)


class MemoryKeyring(keyring.backend.KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.passwords.pop((service, username))


@pytest.fixture
def memory_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[MemoryKeyring]:
    monkeypatch.delenv("HOLODESK_API_KEY", raising=False)
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def test_the_api_key_goes_to_the_keyring_and_never_into_the_file(
    path: Path, tmp_path: Path, memory_keyring: MemoryKeyring
) -> None:
    settings = every_field_changed(tmp_path)
    secret = "sk-holodesk-very-secret-123"

    store_api_key(settings, secret)
    save_settings(settings, path)

    assert secret not in path.read_text(encoding="utf-8")
    assert "sk-" not in path.read_text(encoding="utf-8")
    assert memory_keyring.passwords == {("holodesk", "gpu-box"): secret}
    lookup = find_api_key(read_settings(path))
    assert lookup.key == secret
    assert lookup.source == "keyring (holodesk/gpu-box)"
    with pytest.raises(SettingValueError, match=r"model\.remote\.base_url"):
        store_api_key(Settings(), secret)


def test_an_api_key_written_into_the_file_is_refused_without_repeating_it(path: Path) -> None:
    path.parent.mkdir(parents=True)
    path.write_text(
        '[model.remote]\nbase_url = "http://gpu-box:8000/v1"\napi_key = "sk-leaked-456"\n', encoding="utf-8"
    )

    problem = load_settings(path).problem

    assert problem is not None
    [line] = problem.problems
    assert line.startswith("model.remote.api_key:")
    assert "keyring" in line
    assert "sk-leaked-456" not in str(problem)


def test_server_urls_are_normalised_as_the_remote_backend_does() -> None:
    from holodesk.app.common.settings import normalize_server_url
    from holodesk.inference.remote import normalize_base_url

    for typed in ("gpu-box:8000", "http://gpu-box:8000/", "https://gpu-box/openai/v1", " 127.0.0.1:8765 "):
        assert normalize_server_url(typed) == normalize_base_url(typed)
    assert normalize_server_url("gpu-box:8000") == "http://gpu-box:8000/v1"
    for bad in ("ftp://gpu-box", "gpu box:8000", "http://", ""):
        with pytest.raises(ValueError, match="server URL"):
            normalize_server_url(bad)
