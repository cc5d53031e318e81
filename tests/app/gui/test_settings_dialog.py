"""The settings window writes valid settings, refuses bad values, and never silently replaces a broken file."""

from __future__ import annotations

import tomllib

import keyring
import keyring.backend
import pytest

from holodesk.app.common.settings import Settings, load_settings
from holodesk.app.gui.settings_dialog import SettingsDialog


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
