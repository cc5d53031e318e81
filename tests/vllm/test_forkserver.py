"""The fork server the pool starts its vLLM servers from (bench/rigs/vllm_forkserver.py): a forked server
that fails says why and with which status, no server outlives a killed fork server, and a pooled
server's engine core is forked from it rather than spawned.

Every pooled test (the rest of the vLLM tier) is served by a forked server, so that it serves as one
started on its own command would is what those tests show; these two check what only a fork can get
wrong. The second has a fork server of its own, since it kills it.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bench.rigs.vllm_forkserver import ForkServer
from bench.rigs.vllm_server import VLLM_PYTHON, ServerStartError, VllmServer, serve, server_args, server_env
from tests.support.processes import children_of
from tests.support.vllm_pool import VllmPool
from tests.support.vllm_servers import HOLOTRON_TINY
from tests.support.waiting import wait_until

pytestmark = pytest.mark.vllm


def _gone(pid: int) -> bool:
    """True once `pid` has ended and been reaped (a zombie still answers a signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except OSError:
        return True


def test_a_forked_server_that_cannot_start_ends_with_its_status_and_its_log_says_why(
    vllm_pool: VllmPool, tmp_path: Path
) -> None:
    missing = tmp_path / "no-such-checkpoint"
    with pytest.raises(ServerStartError) as failure, serve(missing, tmp_path / "server", launcher=vllm_pool.launcher()):
        pass
    words = str(failure.value)
    assert "vLLM exited with status 1 before it was ready" in words, words
    assert str(missing) in words, words  # the server's own error, from the log the fork gave it


def test_a_killed_fork_server_takes_its_servers_with_it(vllm_pool: VllmPool, tmp_path: Path) -> None:
    checkpoint = vllm_pool.checkpoint(HOLOTRON_TINY.checkpoint)
    forkserver = ForkServer(VLLM_PYTHON, server_env(tmp_path / "forkserver"), tmp_path / "forkserver.log")
    log = tmp_path / "vllm-server.log"
    args = server_args(checkpoint, 1, max_model_len=4096, max_images=1, dtype="float32")
    process = forkserver.launch(args, server_env(tmp_path), tmp_path, log)
    # Running vLLM's own code (its first log line is the arguments it parsed), then its fork server dies.
    wait_until(
        lambda: log.exists() and "non-default args" in log.read_text(errors="replace"),
        120,
        "the forked server's first log line",
    )
    os.kill(forkserver.pid, signal.SIGKILL)
    wait_until(lambda: _gone(process.pid), 60, f"the server {process.pid} ending after its fork server was killed")
    forkserver.close()


def test_a_pooled_servers_engine_core_is_forked_not_spawned(vllm_server: VllmServer) -> None:
    """A spawned engine core runs multiprocessing's spawn_main in a fresh interpreter; a forked one is
    still the fork server's program (what its command line says), with vLLM's engine running in it."""
    assert vllm_server.process is not None
    commands = [
        Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode() for pid in children_of(vllm_server.pid)
    ]
    assert commands, f"the API server {vllm_server.pid} has no engine process"
    assert all("vllm_forkserver.py" in command for command in commands), commands
    assert "EngineCore" in vllm_server.log.read_text(errors="replace")


def test_forking_the_engine_core_is_refused_without_one_openmp_thread(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="OMP_NUM_THREADS=1"):
        ForkServer(VLLM_PYTHON, {"OMP_NUM_THREADS": "2"}, tmp_path / "forkserver.log", fork_engine_core=True)
    assert not (tmp_path / "forkserver.log").exists()  # refused before anything started
