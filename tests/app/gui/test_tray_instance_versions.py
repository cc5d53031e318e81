"""The tray app's own words when a `holodesk` of another install (another protocol version) reaches it.

A real HolodeskApp in this process with a real InstanceServer on its real socket path (a private
instance name); the other install's command is the exact bytes version 1 sent, from a thread.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from holodesk.app.common.instance_client import INSTANCE_NAME_ENV, send_to_running_instance, server_address
from holodesk.app.common.instance_protocol import PROTOCOL_VERSION
from holodesk.app.common.settings import LoadedSettings, Settings
from holodesk.app.gui.main import HolodeskApp, tray_icon
from holodesk.app.gui.single_instance import InstanceServer, lock_path


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[InstanceServer]:
    monkeypatch.setenv(INSTANCE_NAME_ENV, f"hd-test-{uuid.uuid4().hex[:10]}")
    instance = InstanceServer()
    assert instance.listen()
    yield instance
    instance.close()
    for leftover in (instance.address, lock_path(instance.address)):
        Path(leftover).unlink(missing_ok=True)


def _version_1_trigger(answers: list[bytes]) -> None:
    """What version 1's `holodesk trigger` did: a bare word, then one answer line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(server_address())
        client.sendall(b"prompt\n")
        answers.append(client.recv(256))


def test_the_tray_says_why_another_installs_command_did_nothing(qtbot, tmp_path, server) -> None:
    app = HolodeskApp(LoadedSettings(Settings(), tmp_path / "settings.toml"), tray_icon, server)
    qtbot.addWidget(app.thinking)
    qtbot.addWidget(app.loading)
    answers: list[bytes] = []
    old_client = threading.Thread(target=_version_1_trigger, args=(answers,))

    old_client.start()
    qtbot.waitUntil(lambda: app.indicator.last_notification[0] == "Holodesk did nothing", timeout=10_000)
    old_client.join(10)

    text = app.indicator.last_notification[1]
    assert "asked for 'prompt' with no protocol version" in text
    assert f"this tray app speaks protocol version {PROTOCOL_VERSION}" in text
    assert "Run the command from this install, or quit the tray app and start it from the command's install." in text
    assert answers and answers[0].startswith(b"error version mismatch:")
    assert not app.prompt.isVisible()
    # The same command from this install opens the prompt: the refusal above was the version's doing.
    finished: list[str] = []
    this_client = threading.Thread(target=lambda: finished.append(send_to_running_instance("prompt")))
    this_client.start()
    qtbot.waitUntil(app.prompt.isVisible, timeout=10_000)
    this_client.join(10)
    assert finished == ["ok"]
    app.prompt.hide()
