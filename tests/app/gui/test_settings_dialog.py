"""The settings window writes valid settings, refuses bad values, and never silently replaces a broken file."""

from __future__ import annotations

import tomllib

import keyring
import keyring.backend
import pytest

from holodesk.app.common.settings import Settings, load_settings
from holodesk.app.gui.qt import QtWidgets
from holodesk.app.gui.settings_dialog import SettingsDialog
from holodesk.inference.profiles import PROFILE_NAMES


class MemoryKeyring(keyring.backend.KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.passwords.get((service, username))

    def set_password(self, service, username, password):
        self.passwords[(service, username)] = password

    def delete_password(self, service, username):
        self.passwords.pop((service, username), None)


@pytest.fixture
def memory_keyring():
    previous = keyring.get_keyring()
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    yield backend
    keyring.set_keyring(previous)


def make_dialog(qtbot, path, settings=None, problem=None):
    dialog = SettingsDialog(settings or Settings(), path, problem)
    qtbot.addWidget(dialog)
    return dialog


def test_saving_writes_the_form_and_keeps_the_key_out_of_the_file(qtbot, tmp_path, memory_keyring):
    path = tmp_path / "settings.toml"
    dialog = make_dialog(qtbot, path)
    dialog.backend.setCurrentText("remote")
    dialog.base_url.setText("http://gpu-box:8000/v1")
    dialog.api_key.setText("sk-secret")
    dialog.max_steps.setValue(12)
    dialog.auto_approve["scroll"].setChecked(True)
    with qtbot.waitSignal(dialog.saved, timeout=1000) as saved:
        assert dialog.save()
    loaded = load_settings(path)
    assert loaded.problem is None
    assert loaded.settings == saved.args[0]
    assert loaded.settings.model.backend == "remote"
    assert loaded.settings.run.max_steps == 12
    assert loaded.settings.approval.auto_approve == frozenset({"scroll"})
    text = path.read_text(encoding="utf-8")
    assert "sk-secret" not in text
    assert tomllib.loads(text)["model"]["remote"]["base_url"] == "http://gpu-box:8000/v1"
    assert memory_keyring.passwords == {("holodesk", "gpu-box"): "sk-secret"}


def test_a_bad_value_is_explained_and_nothing_is_written(qtbot, tmp_path):
    path = tmp_path / "settings.toml"
    dialog = make_dialog(qtbot, path)
    dialog.backend.setCurrentText("remote")
    dialog.base_url.setText("gpu-box without a scheme")
    with qtbot.assertNotEmitted(dialog.saved):
        assert not dialog.save()
    assert "model.remote.base_url" in dialog.problem.text()
    assert not path.exists()


def test_a_broken_file_is_replaced_only_when_the_user_agrees(qtbot, tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text("[run]\nmax_steps = 'many'\n", encoding="utf-8")
    loaded = load_settings(path)
    assert loaded.problem is not None
    dialog = make_dialog(qtbot, path, loaded.settings, loaded.problem)
    dialog.confirm_replace_broken = lambda problem: False
    assert not dialog.save()
    assert path.read_text(encoding="utf-8") == "[run]\nmax_steps = 'many'\n"
    assert "left as it is" in dialog.problem.text()

    dialog.confirm_replace_broken = lambda problem: True
    assert dialog.save()
    assert load_settings(path).problem is None
    backups = list(tmp_path.glob("settings.toml.broken-*"))
    assert len(backups) == 1 and backups[0].read_text(encoding="utf-8") == "[run]\nmax_steps = 'many'\n"


def test_a_broken_file_keeps_its_valid_values_in_the_form(qtbot, tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text(
        '[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "http://gpu-box:8000/v1"\n'
        '[run]\nmax_steps = "many"\nmonitor = 1\n\n[hotkeys]\nprompt = "<ctrl>+<alt>+j"\n',
        encoding="utf-8",
    )
    loaded = load_settings(path)
    assert loaded.problem is not None and loaded.settings.model.backend == "remote"  # the app runs on them too
    dialog = make_dialog(qtbot, path, loaded.settings, loaded.problem)
    # The form shows what the file got right; only the bad value is at its default.
    assert dialog.backend.currentText() == "remote"
    assert dialog.base_url.text() == "http://gpu-box:8000/v1"
    assert dialog.prompt_hotkey.text() == "<ctrl>+<alt>+j"
    assert dialog.max_steps.value() == Settings().run.max_steps


def test_only_the_chosen_backends_fields_are_shown(qtbot, tmp_path):
    dialog = make_dialog(qtbot, tmp_path / "settings.toml")
    dialog.show()
    shown = {name: [w.isVisible() for w in widgets] for name, widgets in dialog.backend_fields.items()}
    assert shown == {"local": [True, True], "remote": [False, False, False], "scripted": [False]}
    dialog.backend.setCurrentText("remote")
    assert all(w.isVisible() for w in dialog.backend_fields["remote"])
    assert not any(w.isVisible() for w in (*dialog.backend_fields["local"], *dialog.backend_fields["scripted"]))


def test_a_url_without_a_scheme_is_accepted_as_the_command_line_accepts_it(qtbot, tmp_path):
    path = tmp_path / "settings.toml"
    dialog = make_dialog(qtbot, path)
    dialog.backend.setCurrentText("remote")
    dialog.base_url.setText("127.0.0.1:8765")
    assert dialog.save(), dialog.problem.text()
    assert load_settings(path).settings.model.remote.base_url == "http://127.0.0.1:8765/v1"


def test_a_toml_syntax_error_keeps_the_other_lines_and_saving_keeps_the_server_url(qtbot, tmp_path):
    path = tmp_path / "settings.toml"
    path.write_text(
        '[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "http://gpu-box:8000/v1"\n'
        "[run]\nmax_steps = 12 steps\n",
        encoding="utf-8",
    )
    loaded = load_settings(path)
    dialog = make_dialog(qtbot, path, loaded.settings, loaded.problem)
    warning = dialog.findChild(QtWidgets.QLabel, "settings_problem")
    assert "line 7: not valid TOML" in warning.text() and "uses the default for each" in warning.text()
    assert dialog.base_url.text() == "http://gpu-box:8000/v1"
    dialog.confirm_replace_broken = lambda problem: True
    assert dialog.save()
    saved = load_settings(path)
    assert saved.problem is None
    assert saved.settings.model.backend == "remote"
    assert saved.settings.model.remote.base_url == "http://gpu-box:8000/v1"


def test_a_profile_the_local_backend_cannot_run_is_refused_before_saving(qtbot, tmp_path):
    """The tray runs what the file says; the file alone may hold the pair (a command line's --backend
    remote overrides its backend), so the window refuses it, not the settings module."""
    path = tmp_path / "settings.toml"
    dialog = make_dialog(qtbot, path)
    dialog.backend.setCurrentText("remote")
    dialog.profile.setCurrentIndex(dialog.profile.findData("holo1.5"))
    assert not dialog.problem.isVisibleTo(dialog)  # served by vLLM: nothing to say
    dialog.backend.setCurrentText("local")
    # Said as soon as the pair is chosen, in the same words as at Save.
    assert dialog.problem.isVisibleTo(dialog) and "the holo1.5 profile cannot run" in dialog.problem.text()
    with qtbot.assertNotEmitted(dialog.saved):
        assert not dialog.save()
    problem = dialog.problem.text()
    assert problem.startswith("model.profile: the holo1.5 profile cannot run in the in-process backend"), problem
    assert "use the remote backend" in problem
    assert not path.exists()
    dialog.backend.setCurrentText("remote")  # the fix the words name takes the line away
    assert not dialog.problem.isVisibleTo(dialog)


def test_profiles_are_listed_by_their_models_and_where_they_run(qtbot, tmp_path):
    dialog = make_dialog(qtbot, tmp_path / "settings.toml")
    labels = {dialog.profile.itemData(i): dialog.profile.itemText(i) for i in range(dialog.profile.count())}
    assert set(labels) == set(PROFILE_NAMES)
    assert labels["holo4"] == "holo4: Holo4 27B, 35B-A3B (in Holodesk or on a server)"
    assert labels["holo1.5"].endswith("(on a vLLM server)")
    assert labels["holotron"] == "holotron: Holotron-12B (in Holodesk or on a server)"
    dialog.profile.setCurrentIndex(dialog.profile.findData("holo3.1-tools"))
    assert dialog.edited_settings().model.profile == "holo3.1-tools"  # the name is saved, not the label
