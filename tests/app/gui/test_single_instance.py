"""The single running instance: a real instance process, the real `holodesk trigger`, crashes and strangers.

Every test uses its own HOLODESK_INSTANCE_NAME, so nothing here can reach (or be reached by) a real
Holodesk the user is running.
"""

from __future__ import annotations

import json
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
    ProtocolMismatchError,
    display_key,
    instance_name,
    send_to_running_instance,
    server_address,
)
from holodesk.app.common.instance_protocol import INSTALL_DIR, PROTOCOL_VERSION, encode_answer, encode_request
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

    def expect_next(self, line: str, timeout_s: float = 10.0) -> None:
        """The very next line printed is `line`: nothing (such as a refused command acted on) came before it."""
        try:
            got = self.lines.get(timeout=timeout_s)
        except queue.Empty:
            pytest.fail(f"instance printed nothing within {timeout_s} s; expected {line!r}")
        assert got == line

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
    """One raw line to the instance and its whole answer, as any client (of any version) would send it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(server_address())
        client.sendall(line)
        received = b""
        while not received.endswith(b"\n"):
            chunk = client.recv(4096)
            if not chunk:
                break
            received += chunk
        return received


def _json_answer(line: bytes) -> dict[str, object]:
    answer = json.loads(_exchange(line))
    assert isinstance(answer, dict), answer
    return answer


def test_unknown_commands_are_refused_and_not_emitted(start_instance: StartInstance) -> None:
    instance = start_instance()
    instance.expect("listening")

    garbage = _exchange(b"rm -rf /\n")
    unknown = _json_answer(json.dumps({"protocol_version": PROTOCOL_VERSION, "command": "explode"}).encode() + b"\n")

    assert garbage.startswith(b"error not a Holodesk instance message")
    instance.expect("refused Something sent the instance socket 'rm -rf /'")
    assert unknown == {"protocol_version": PROTOCOL_VERSION, "error": unknown["error"]}
    assert str(unknown["error"]).startswith("unknown command 'explode'")
    instance.expect("refused A `holodesk trigger` sent an unknown command 'explode'")
    instance.assert_silent()
    with pytest.raises(ValueError, match="unknown instance command"):
        send_to_running_instance("explode")
    assert (
        _exchange(encode_request("prompt")) == f'{{"protocol_version": {PROTOCOL_VERSION}, "answer": "ok"}}\n'.encode()
    )
    instance.expect("received prompt")


# -- protocol versions: two installs meet ------------------------------------------------------------


def test_an_old_client_without_a_version_gets_the_error_in_its_own_format_and_nothing_is_done(
    start_instance: StartInstance,
) -> None:
    instance = start_instance()
    instance.expect("listening")

    # Exactly what version 1's `holodesk trigger stop` sent: a bare word, no version field.
    answer = _exchange(b"stop\n")

    # Version 1 printed the line after "refused 'stop': " and read at most 256 bytes of it.
    assert answer.startswith(b"error version mismatch:"), answer
    assert len(answer) < 256
    words = answer.decode()
    assert "sent no protocol version" in words
    assert f"speaks version {PROTOCOL_VERSION}" in words
    assert "nothing was done" in words
    assert "restart the tray app" in words
    instance.expect(
        "refused A `holodesk` command from another install asked for 'stop' with no protocol version"
        f" (an install from before versions were sent); this tray app speaks protocol version {PROTOCOL_VERSION}"
    )
    # A JSON line that lacks the field counts as another version too.
    missing = _json_answer(b'{"command": "stop"}\n')
    assert missing["protocol_version"] == PROTOCOL_VERSION
    assert "this command sent no protocol version" in str(missing["error"])
    instance.expect("refused A `holodesk` command from another install asked for 'stop' with no protocol version")
    # Nothing was acted on: "stop" would have ended the instance, and the next line is the next command's.
    assert send_to_running_instance("show") == "ok"
    instance.expect_next("received show")
    assert instance.process.poll() is None


def test_a_client_of_another_version_is_refused_by_the_server_and_nothing_is_done(
    start_instance: StartInstance,
) -> None:
    instance = start_instance()
    instance.expect("listening")
    other = PROTOCOL_VERSION + 1

    answer = _json_answer(json.dumps({"protocol_version": other, "command": "stop"}).encode() + b"\n")

    # Answered in the envelope every version reads, so the client can name the server's version.
    assert answer["protocol_version"] == PROTOCOL_VERSION
    assert str(answer["error"]).startswith(
        f"version mismatch: the tray app speaks protocol version {PROTOCOL_VERSION} (installed at {INSTALL_DIR}),"
        f" this command sent protocol version {other}; nothing was done"
    )
    instance.expect(
        f"refused A `holodesk` command from another install asked for 'stop' with protocol version {other};"
        f" this tray app speaks protocol version {PROTOCOL_VERSION} (installed at {INSTALL_DIR}), so nothing was done."
        " Run the command from this install, or quit the tray app and start it from the command's install."
    )
    assert send_to_running_instance("prompt") == "ok"
    instance.expect_next("received prompt")
    assert instance.process.poll() is None


class OtherVersionTray:
    """A tray app of another protocol version on the real socket path: answers each line with `answer`.

    Version 1's server answered a line it did not know (our JSON) with "error unknown command ..."; a
    later version answers in the JSON envelope with its own number. Either way it acts on nothing.
    """

    def __init__(self, answer: Callable[[str], str]) -> None:
        self.answer = answer
        self.received: list[str] = []
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(server_address())
        self.listener.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed by close()
                return
            with connection:
                line = connection.makefile("r").readline().strip()
                if not line:  # a probe that connects and hangs up (a start asking whether a tray listens)
                    continue
                self.received.append(line)
                connection.sendall(f"{self.answer(line)}\n".encode())

    def close(self) -> None:
        self.listener.close()
        self.thread.join(timeout=10)
        Path(server_address()).unlink(missing_ok=True)


@pytest.fixture
def other_version_tray(instance_env: dict[str, str]) -> Iterator[Callable[[Callable[[str], str]], OtherVersionTray]]:
    started: list[OtherVersionTray] = []

    def start(answer: Callable[[str], str]) -> OtherVersionTray:
        started.append(OtherVersionTray(answer))
        return started[-1]

    yield start
    for tray in started:
        tray.close()


CLIENT_FIX = "Quit the tray app and start `holodesk` again from this install, or run the command from the install"


def test_trigger_against_a_version_1_tray_names_both_versions_and_the_fix(
    other_version_tray: Callable[[Callable[[str], str]], OtherVersionTray], instance_env: dict[str, str]
) -> None:
    # Version 1's _read_command, word for word in what it answered.
    tray = other_version_tray(
        lambda line: (
            "ok"
            if line in ("prompt", "show", "stop")
            else f"error unknown command {line[:40]!r} (expected prompt, show, stop)"
        )
    )

    result = holodesk("trigger", env=instance_env)

    assert result.returncode == 1
    assert tray.received == [encode_request("prompt").decode().strip()]
    assert (
        "holodesk trigger: the running Holodesk tray app speaks no protocol version (an install from before versions"
        f" were sent), this holodesk (installed at {INSTALL_DIR}) speaks protocol version {PROTOCOL_VERSION}: they"
        " come from different installs, and 'prompt' was not done."
    ) in result.stderr
    assert CLIENT_FIX in result.stderr


def test_trigger_and_a_second_start_against_a_later_version_name_both_versions(
    other_version_tray: Callable[[Callable[[str], str]], OtherVersionTray], instance_env: dict[str, str]
) -> None:
    later = PROTOCOL_VERSION + 1
    tray = other_version_tray(lambda line: json.dumps({"protocol_version": later, "error": "not for me"}))

    result = holodesk("trigger", "stop", env=instance_env)
    with pytest.raises(ProtocolMismatchError, match=f"speaks protocol version {later}, this holodesk"):
        send_to_running_instance("show")
    second_start = subprocess.run(
        [sys.executable, "-m", "tests.support.instance_server"],
        cwd=REPO_ROOT,
        env=instance_env,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert result.returncode == 1
    assert f"tray app speaks protocol version {later}, this holodesk" in result.stderr
    assert f"speaks protocol version {PROTOCOL_VERSION}: they come from different installs" in result.stderr
    assert CLIENT_FIX in result.stderr
    assert "not for me" not in result.stderr  # the words are this side's, not the other version's
    # The second start neither becomes the instance nor claims to have handed over.
    assert second_start.returncode != 0
    assert "handed-over" not in second_start.stdout
    assert f"ProtocolMismatchError: the running Holodesk tray app speaks protocol version {later}" in (
        second_start.stderr
    )
    assert len(tray.received) == 3


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


def test_instance_name_is_per_user_and_display_and_the_socket_prefers_the_runtime_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(INSTANCE_NAME_ENV, raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setenv("DISPLAY", ":1.0")
    assert instance_name() == f"holodesk-{os.getuid()}-x11-1"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert server_address() == str(tmp_path / f"holodesk-{os.getuid()}-x11-1.sock")
    monkeypatch.delenv("DISPLAY")
    assert instance_name() == f"holodesk-{os.getuid()}"  # no display named: one per user, as before
    monkeypatch.setenv(INSTANCE_NAME_ENV, "/run/custom.sock")
    assert server_address() == "/run/custom.sock"


@pytest.mark.parametrize(
    ("x11", "wayland", "key"),
    [
        (":1", "", "x11-1"),
        (":1.0", "", "x11-1"),  # a screen number is the same display
        ("unix:1", "", "x11-1"),
        ("localhost:01.2", "", "x11-1"),
        (":10", "wayland-0", "x11-10"),  # Holodesk's windows are X11 ones (XWayland) where DISPLAY is set
        ("far.example:3.0", "", "x11-far.example-3"),
        ("", "wayland-1", "wl-wayland-1"),
        ("", "/run/user/1000/wayland-2", "wl-_run_user_1000_wayland-2"),
        ("", "", ""),
    ],
)
def test_display_key_names_one_display_one_way(x11: str, wayland: str, key: str) -> None:
    assert display_key(x11, wayland) == key


def test_displays_differ_in_keys() -> None:
    assert len({display_key(f":{number}", "") for number in range(12)}) == 12
    assert display_key(":1", "") != display_key("far.example:1", "")


# -- "mcp": the connection itself handed to the tray app --------------------------------------------
# The stand-in tray (tests/support/instance_server.py, the real InstanceServer) echoes each line of a
# handed connection: the tests see what reaches the tray, and what comes back.


def read_line(connection: socket.socket, buffered: bytearray) -> bytes:
    while b"\n" not in buffered:
        chunk = connection.recv(4096)
        assert chunk, f"the connection closed; had {bytes(buffered)!r}"
        buffered += chunk
    line, _, rest = bytes(buffered).partition(b"\n")
    buffered[:] = rest
    return line


def test_the_mcp_command_hands_the_connection_over_with_the_bytes_sent_along(start_instance: StartInstance) -> None:
    instance = start_instance()
    instance.expect("listening")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        client.connect(server_address())
        client.sendall(encode_request("mcp") + b"first line\n")  # a client that does not wait for the answer
        buffered = bytearray()
        assert json.loads(read_line(client, buffered)) == {"protocol_version": PROTOCOL_VERSION, "answer": "ok"}
        instance.expect("mcp-connected")
        assert read_line(client, buffered) == b"echo: first line"
        client.sendall(b"second line\n")
        assert read_line(client, buffered) == b"echo: second line"
    instance.assert_silent()  # not a trigger command: nothing was emitted as one


def test_holodesk_mcp_relays_its_stdio_to_the_tray_and_ends_when_the_host_closes_it(
    start_instance: StartInstance, instance_env: dict[str, str]
) -> None:
    instance = start_instance()
    instance.expect("listening")
    env = {k: v for k, v in instance_env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    relay = subprocess.run(
        [str(HOLODESK), "mcp"], input="hello\nand more\n", capture_output=True, text=True, timeout=60, env=env
    )
    assert relay.returncode == 0, relay.stderr
    assert relay.stdout == "echo: hello\necho: and more\n"  # only the tray's bytes on the protocol's channel
    assert "every step goes to it" in relay.stderr


def test_a_tray_that_refuses_the_mcp_command_leaves_holodesk_mcp_to_show_its_own_panel(tmp_path) -> None:
    """A tray app from before the command answers "unknown command": said, then the server goes on alone
    (here without a display, so it stops there, in words)."""
    address = tmp_path / "tray.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as tray:
        tray.bind(str(address))
        tray.listen(1)
        older = "unknown command 'mcp' (expected prompt, show, stop)"

        def answer_once() -> None:
            connection, _ = tray.accept()
            with connection:
                connection.recv(4096)
                connection.sendall(encode_answer(error=older).encode() + b"\n")

        threading.Thread(target=answer_once, daemon=True).start()
        env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        env["HOLODESK_INSTANCE_NAME"] = str(address)
        done = subprocess.run(
            [str(HOLODESK), "mcp"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60, env=env
        )
    assert f"holodesk mcp: the tray app refused: {older}; this server shows its own approval panel" in done.stderr
    assert "no display: holodesk mcp shows each step" in done.stderr and done.returncode == 2
    assert done.stdout == ""
