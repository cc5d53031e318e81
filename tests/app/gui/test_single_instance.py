"""The single running instance: a real instance process, the real `holodesk trigger`, crashes and strangers.

Every test uses its own HOLODESK_INSTANCE_NAME, so nothing here can reach (or be reached by) a real
Holodesk the user is running.
"""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from holodesk.app.common.instance_client import (
    INSTANCE_NAME_ENV,
    NoInstanceError,
    instance_name,
    send_to_running_instance,
    server_address,
)
from holodesk.app.gui.single_instance import IDLE_CLIENT_TIMEOUT_MS, lock_path

REPO_ROOT = Path(__file__).resolve().parents[3]
HOLODESK = Path(sys.executable).parent / "holodesk"
NOT_RUNNING = "start `holodesk` first"


class InstanceProcess:
    """tests/support/instance_server.py in a subprocess, its stdout lines readable with a timeout."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.instance_server"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, line: str, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        seen: list[str] = []
        while time.monotonic() < deadline:
            try:
                got = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if got.startswith(line):
                return
            seen.append(got)
        pytest.fail(f"instance did not print {line!r} within {timeout_s} s; it printed {seen!r}")

    def assert_silent(self, wait_s: float = 0.3) -> None:
        time.sleep(wait_s)
        assert self.lines.empty(), f"instance printed {self.lines.get()!r}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


StartInstance = Callable[[], InstanceProcess]


@pytest.fixture
def instance_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A private instance name for this test (in this process and its children) and a clean-up of its files."""
    name = f"hd-test-{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv(INSTANCE_NAME_ENV, name)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO_ROOT))
    yield env
    address = server_address()
    for leftover in (address, lock_path(address)):
        Path(leftover).unlink(missing_ok=True)


@pytest.fixture
def start_instance(instance_env: dict[str, str]) -> Iterator[StartInstance]:
    started: list[InstanceProcess] = []

    def start() -> InstanceProcess:
        instance = InstanceProcess(instance_env)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def holodesk(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed console script, as a desktop shortcut would run it."""
    assert HOLODESK.exists(), f"{HOLODESK} is missing: install the project with `pip install -e .`"
    return subprocess.run([str(HOLODESK), *args], env=env, capture_output=True, text=True, timeout=30)


def test_trigger_opens_the_prompt_of_the_running_instance(
    start_instance: StartInstance, instance_env: dict[str, str]
) -> None:
    instance = start_instance()
    instance.expect("listening")

    result = holodesk("trigger", env=instance_env)

    assert result.returncode == 0, result.stderr
    instance.expect("received prompt")


def test_show_and_stop_reach_the_instance_and_stop_removes_its_files(
    start_instance: StartInstance, instance_env: dict[str, str]
) -> None:
    instance = start_instance()
    instance.expect("listening")
    address = server_address()
    assert Path(address).exists()
    assert Path(lock_path(address)).exists()

    assert holodesk("trigger", "show", env=instance_env).returncode == 0
    instance.expect("received show")
    assert holodesk("trigger", "stop", env=instance_env).returncode == 0
    instance.expect("received stop")

    assert instance.process.wait(timeout=10) == 0
    assert not Path(address).exists()
    assert not Path(lock_path(address)).exists()


def test_socket_is_private_to_the_user(start_instance: StartInstance) -> None:
    instance = start_instance()
    instance.expect("listening")

    mode = os.stat(server_address()).st_mode
    assert mode & 0o077 == 0, oct(mode)


def test_a_second_start_shows_the_running_instance_and_exits(
    start_instance: StartInstance, instance_env: dict[str, str]
) -> None:
    first = start_instance()
    first.expect("listening")

    second = subprocess.run(
        [sys.executable, "-m", "tests.support.instance_server"],
        cwd=REPO_ROOT,
        env=instance_env,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "handed-over"
    first.expect("received show")
    # The first instance still owns the socket.
    assert send_to_running_instance("prompt") == "ok"
    first.expect("received prompt")


def test_trigger_without_an_instance_says_to_start_holodesk(instance_env: dict[str, str]) -> None:
    result = holodesk("trigger", env=instance_env)

    assert result.returncode == 1
    assert NOT_RUNNING in result.stderr
    with pytest.raises(NoInstanceError, match="start `holodesk` first"):
        send_to_running_instance("prompt")


def test_a_crashed_instance_is_replaced_by_the_next_start(
    start_instance: StartInstance, instance_env: dict[str, str]
) -> None:
    crashed = start_instance()
    crashed.expect("listening")
    crashed.process.send_signal(signal.SIGKILL)
    crashed.process.wait(timeout=10)
    address = server_address()
    # What a crash leaves behind: the socket file and a lock naming a dead process.
    assert Path(address).exists()
    assert Path(lock_path(address)).exists()

    refused = holodesk("trigger", env=instance_env)
    assert refused.returncode == 1
    assert NOT_RUNNING in refused.stderr

    replacement = start_instance()
    replacement.expect("listening")
    assert holodesk("trigger", env=instance_env).returncode == 0
    replacement.expect("received prompt")


def test_a_stale_socket_file_alone_is_removed(start_instance: StartInstance, instance_env: dict[str, str]) -> None:
    address = server_address()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(address)
    stale.close()  # the file stays, nobody listens: connecting is refused
    assert Path(address).exists()

    with pytest.raises(NoInstanceError):
        send_to_running_instance("prompt")

    instance = start_instance()
    instance.expect("listening")
    assert holodesk("trigger", env=instance_env).returncode == 0
    instance.expect("received prompt")


def _exchange(line: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(server_address())
        client.sendall(line)
        return client.recv(256)


def test_unknown_commands_are_refused_and_not_emitted(start_instance: StartInstance) -> None:
    instance = start_instance()
    instance.expect("listening")

    answer = _exchange(b"rm -rf /\n")

    assert answer.startswith(b"error unknown command")
    instance.assert_silent()
    with pytest.raises(ValueError, match="unknown instance command"):
        send_to_running_instance("explode")
    assert _exchange(b"prompt\n") == b"ok\n"
    instance.expect("received prompt")


def test_a_silent_client_neither_blocks_others_nor_stays_forever(start_instance: StartInstance) -> None:
    instance = start_instance()
    instance.expect("listening")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.settimeout(IDLE_CLIENT_TIMEOUT_MS / 1000 + 3)
        silent.connect(server_address())

        assert send_to_running_instance("prompt") == "ok"
        instance.expect("received prompt")

        started = time.monotonic()
        assert silent.recv(16) == b""  # the server hung up on it
        assert time.monotonic() - started < IDLE_CLIENT_TIMEOUT_MS / 1000 + 2


def test_instance_name_is_per_user_and_the_socket_prefers_the_runtime_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(INSTANCE_NAME_ENV, raising=False)
    assert instance_name() == f"holodesk-{os.getuid()}"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert server_address() == str(tmp_path / f"holodesk-{os.getuid()}.sock")
    monkeypatch.setenv(INSTANCE_NAME_ENV, "/run/custom.sock")
    assert server_address() == "/run/custom.sock"
