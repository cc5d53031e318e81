"""`holodesk eval miniwob --workers 2` and `--ray` when a worker's Chromium or Xvfb is SIGKILLed mid-episode.

The command runs as a user would start it, against a loopback server that holds every step's
answer until the test has killed its part: both workers are then mid-episode, waiting. The killed
worker's episode must run again on a fresh desktop, once, and the JSON must account for every
episode; each worker's temp folder (TMPDIR for the command here, and for the Ray node) must be gone.
The workers are found by their command line (`--root` under this test's temp folder), their parts
by name among their children.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer, Reply
from holodesk.app.eval.ray_backend import DESKTOP_RESOURCE
from tests.support.holodesk_command import HOLODESK_COMMAND, ctrl_c_as_from_a_terminal
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.display, pytest.mark.chromium]

CORNER = Completion(text='{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}')
GATE_TIMEOUT_S = 180.0


class GatedServer(FakeOpenAIServer):
    """Answers each step with a click outside the page, but only once `gate` is set (requests are
    recorded as they arrive, before the wait)."""

    def __init__(self) -> None:
        super().__init__()
        self.default_reply = CORNER
        self.gate = threading.Event()

    def __enter__(self) -> GatedServer:
        self.start()
        return self

    def _next_reply(self) -> Reply:
        self.gate.wait(GATE_TIMEOUT_S)
        return super()._next_reply()


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _group(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, IndexError):
        return -1


def _workers(temp: Path) -> dict[int, Path]:
    """The eval workers whose root is under `temp`: pid -> root (each leads its group; its reaper, a
    fork with the same command line, does not)."""
    found = {}
    for pid in _pids():
        line = _cmdline(pid)
        if "holodesk.app.eval.episode_worker" in line and "--root" in line and _group(pid) == pid:
            root = Path(line[line.index("--root") + 1])
            if root.parent == temp:
                found[pid] = root
    return found


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError):
        return -1


def _name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _part(worker: int, part: str) -> int:
    """The pid of a worker's `part`: "Xvfb" (its child) or "chromium" (its chromedriver's child)."""
    children = [pid for pid in _pids() if _parent(pid) == worker]
    if part == "Xvfb":
        [found] = [pid for pid in children if _name(pid) == "Xvfb"]
        return found
    [driver] = [pid for pid in children if _name(pid) == "chromedriver"]
    [found] = [pid for pid in _pids() if _parent(pid) == driver and "chrom" in _name(pid)]
    return found


def _holodesk_leftovers(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith(("holodesk-", "hd-", "xvfb-")))


def _no_leftovers(temp: Path, timeout_s: float) -> None:
    """Wait (bounded) until no worker's folder is left in `temp`; else fail naming what is there."""
    try:
        wait_until(lambda: _holodesk_leftovers(temp) == [], timeout_s, "every worker's temp folder to be removed")
    except AssertionError as exc:
        left = sorted(str(path.relative_to(temp)) for path in temp.rglob("*"))
        raise AssertionError(f"{exc}; left: {left[:20]}") from None


def _eval(arguments: list[str], server: FakeOpenAIServer, temp: Path) -> subprocess.Popen[str]:
    python, *module = HOLODESK_COMMAND
    return subprocess.Popen(
        [python, "-X", "faulthandler", *module, "eval", "miniwob", *arguments, "--zoom", "2", "--max-steps", "1",
         "--backend", "remote", "--base-url", server.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "HOLODESK_API_KEY": "test-key", "TMPDIR": str(temp)},
        preexec_fn=ctrl_c_as_from_a_terminal,
    )  # fmt: skip


def _finish(command: subprocess.Popen[str], timeout_s: float = 300) -> tuple[str, str]:
    try:
        return command.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        command.send_signal(signal.SIGABRT)  # its threads' stacks, on its stderr
        _out, err = command.communicate(timeout=30)
        pytest.fail(f"the eval did not end within {timeout_s:g} s; its stderr:\n{err}")


@pytest.fixture
def temp() -> Iterator[Path]:
    """The command's TMPDIR: short, since Chromium's sockets go three folders under it (107 bytes at most)."""
    folder = Path(tempfile.mkdtemp(prefix="hdt", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _wait_for_steps(server: GatedServer, command: subprocess.Popen[str], count: int) -> None:
    """Wait until `count` steps were asked for; fail with the command's words if it ends first."""

    def asked() -> bool:
        if command.poll() is not None:
            pytest.fail(f"the eval ended (status {command.returncode}) first:\n{command.communicate()[1]}")
        return len(server.chat_requests) >= count

    wait_until(asked, 180, f"{count} workers to ask for their first step")


def _kill_one_part_mid_episode(
    part: str, server: GatedServer, command: subprocess.Popen[str], temp: Path, workers: int = 2
) -> int:
    """Wait until every worker waits on a step, SIGKILL one worker's `part`, then let the answers go."""
    _wait_for_steps(server, command, workers)
    found = _workers(temp)
    assert len(found) == workers, found
    victim = min(found)
    os.kill(_part(victim, part), signal.SIGKILL)
    server.gate.set()
    return victim


def _accounted(written: dict[str, object], seeds: range) -> None:
    episodes = written["episodes"]
    assert isinstance(episodes, list)
    assert [(e["task"], e["seed"]) for e in episodes] == [("click-button", seed) for seed in seeds], episodes
    assert written["episodes_run"] == len(seeds) and written["complete"] is True and written["not_finished"] == []
    assert all(e["outcome"] == "step_limit" for e in episodes), episodes  # none lost to the dead part
    assert written["retried"] == 1


@pytest.mark.parametrize("part", ["chromium", "Xvfb"])
def test_a_part_killed_mid_episode_costs_one_retry_and_every_episode_is_in_the_json(tmp_path, temp, part):
    results = tmp_path / "results.json"
    with GatedServer() as server:
        command = _eval(
            ["--tasks", "click-button", "--episodes", "3", "--workers", "2", "--json", str(results),
             "--sessions", str(tmp_path / "sessions")],
            server,
            temp,
        )  # fmt: skip
        try:
            _kill_one_part_mid_episode(part, server, command, temp)
            _out, err = _finish(command)
        finally:
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 0, err
    _accounted(json.loads(results.read_text()), range(3))
    _no_leftovers(temp, 15)


def test_ctrl_c_mid_episode_writes_what_was_finished_and_leaves_no_folder(tmp_path, temp):
    results = tmp_path / "results.json"
    with GatedServer() as server:
        command = _eval(
            ["--tasks", "click-button", "--episodes", "4", "--workers", "2", "--json", str(results),
             "--sessions", str(tmp_path / "sessions")],
            server,
            temp,
        )  # fmt: skip
        try:
            _wait_for_steps(server, command, 2)
            command.send_signal(signal.SIGINT)
            _out, err = _finish(command, 90)
        finally:
            server.gate.set()
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 3, err
    written = json.loads(results.read_text())
    assert written["complete"] is False and written["stopped"] == "stopped (Ctrl+C)"
    assert written["episodes_run"] == 0 and written["episodes"] == []
    assert written["not_finished"] == [{"task": "click-button", "seed": seed} for seed in range(4)]
    assert f"results so far (0 finished, 4 not): {results}" in err
    _no_leftovers(temp, 15)


# -- on a one-node Ray cluster --------------------------------------------------------------------------


@pytest.fixture
def one_node(temp) -> Iterator[str]:
    """A Ray cluster of one node offering two desktops; its processes' temp folder is `temp`."""
    try:
        from ray.cluster_utils import Cluster
    except ImportError:  # a failure, not a skip: tests/run.sh installs the extra for this tier
        pytest.fail("these tests need Ray: pip install -e '.[cluster]' (tests/run.sh installs it)", pytrace=False)
    cluster = Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "object_store_memory": 96 * 1024 * 1024,
            "include_dashboard": False,
            "resources": {DESKTOP_RESOURCE: 2},
            "env_vars": {"TMPDIR": str(temp), "HOLODESK_API_KEY": "test-key"},
        },
    )
    try:
        cluster.wait_for_nodes()
        yield cluster.address
    finally:
        cluster.shutdown()


def test_on_ray_a_chromium_killed_mid_episode_costs_one_retry_and_every_episode_is_in_the_json(
    tmp_path, temp, one_node
):
    results = tmp_path / "results.json"
    with GatedServer() as server:
        command = _eval(
            ["--tasks", "click-button", "--episodes", "3", "--ray", one_node, "--workers", "2",
             "--json", str(results), "--sessions", str(tmp_path / "sessions")],
            server,
            temp,
        )  # fmt: skip
        try:
            _kill_one_part_mid_episode("chromium", server, command, temp)
            _out, err = _finish(command)
        finally:
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 0, err
    _accounted(json.loads(results.read_text()), range(3))
    _no_leftovers(temp, 30)


def test_on_ray_ctrl_c_writes_the_json_and_leaves_no_folder(tmp_path, temp, one_node):
    results = tmp_path / "results.json"
    with GatedServer() as server:
        command = _eval(
            ["--tasks", "click-button", "--episodes", "3", "--ray", one_node, "--workers", "2",
             "--json", str(results), "--sessions", str(tmp_path / "sessions")],
            server,
            temp,
        )  # fmt: skip
        try:
            _wait_for_steps(server, command, 2)
            command.send_signal(signal.SIGINT)
            _out, err = _finish(command, 90)
        finally:
            server.gate.set()
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 3, err
    written = json.loads(results.read_text())
    assert written["stopped"] == "stopped (Ctrl+C)" and len(written["not_finished"]) == 3
    _no_leftovers(temp, 30)
