"""One process that imports vLLM's API server once and forks each vLLM server from it.

Importing `vllm.entrypoints.openai.api_server` costs 15 s of one core here, about half of a tiny
server's start, and the test session starts fifteen. `ForkServer.launch` asks this process (run by
.venv-vllm's Python as a script) for a server: it forks, and the child becomes what `python -m
vllm.entrypoints.openai.api_server ARGS` would be (the module run as __main__ with those arguments,
its own session and process group, stdin from /dev/null, stdout and stderr to the server's log,
the environment and folder it was given), then exits with that module's status.

vLLM starts the engine core (the process that holds the model) itself. Its CPU platform spawns it: a
fresh interpreter that imports torch and vLLM again, 9 s of a tiny server's 19 s start here. With
`fork_engine_core`, the fork server has the engine's modules imported too, and each server forks its
engine core instead (vLLM's default method on other platforms; its CPU platform picks spawn): a start
took 8-9 s instead of 19 s, with the same answers. The engine core's code, its arguments and its
messages are vLLM's; what differs is that it begins with the API server's memory rather than a fresh
import. A fork is safe only while the API server has started no OpenMP threads, so whoever asks for it
runs the servers with OMP_NUM_THREADS=1 (the test session's pool and the quick benchmark do).

Where a forked server differs from a started one: what a module read from the environment while the
fork server imported it stays as the fork server had it. So the fork server is started with the
environment its servers get (the pool's, tests/support/vllm_pool.py), and a server may only change
what vLLM reads when it starts: its folder, temporary files and caches, each reset here (the
standard library's temporary folder is looked up again).

Lines of JSON on the fork server's stdin and stdout: {"launch": {argv, env, cwd, log}} -> {"pid": N};
{"poll": N} -> {"code": status or null} (a child's status as subprocess gives it: -signal when a signal
ended it). It reaps its children itself, so a stopped server leaves no zombie that looks alive. It
ends when its stdin closes (or, by PDEATHSIG, when the process that started it dies); each server gets
SIGTERM when the fork server dies.

The script side uses the standard library only (it runs in vLLM's environment, where this repository
is not on the path).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

PR_SET_PDEATHSIG = 1
SERVER_MODULE = "vllm.entrypoints.openai.api_server"
READY = "ready"
FORK_ENGINE_CORE = "--fork-engine-core"
# What a forked engine core would otherwise import after the fork, for each server again.
ENGINE_CORE_MODULES = (
    "vllm.v1.engine.core",
    "vllm.v1.executor.uniproc_executor",
    "vllm.v1.worker.cpu_worker",
    "vllm.v1.worker.cpu_model_runner",
    "vllm.model_executor.model_loader.weight_utils",
)


def die_with_parent() -> None:
    """In a child: SIGTERM when its parent dies, even by SIGKILL (Linux's PDEATHSIG).

    A server's owner stops it on a normal end or Ctrl+C; this covers a killed test run, which would
    otherwise leave a 3 GB server behind (it then stops its own engine process).
    """
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the owner's own stop is all there is
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


# --- the client: the test process's side ------------------------------------------------------------


class ForkServerError(RuntimeError):
    """The fork server could not be started or stopped answering (in words, with its output)."""


class ForkedProcess:
    """A server forked by a ForkServer: `pid` leads its own process group; `poll` and `wait` ask the
    fork server, which reaps it (the part of subprocess.Popen that bench.rigs.vllm_server uses)."""

    def __init__(self, owner: ForkServer, pid: int) -> None:
        self._owner = owner
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._owner.status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while (code := self.poll()) is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"vLLM server {self.pid}", timeout or 0.0)
            time.sleep(0.1)
        return code


class ForkServer:
    """The fork server process (see the module docstring), started by `python` with `env`."""

    def __init__(
        self,
        python: Path,
        env: Mapping[str, str],
        log: Path,
        import_deadline_s: float = 300.0,
        *,
        fork_engine_core: bool = False,
    ) -> None:
        if fork_engine_core and env.get("OMP_NUM_THREADS") != "1":
            raise ValueError("fork_engine_core needs OMP_NUM_THREADS=1 in env (see the module docstring)")
        self._lock = threading.Lock()
        self._log = log
        with log.open("wb") as out:
            self._process = subprocess.Popen(
                [str(python), __file__, *([FORK_ENGINE_CORE] if fork_engine_core else [])],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=out,
                env=dict(env),
                text=True,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        self._ready = False
        self._import_deadline_s = import_deadline_s

    @property
    def pid(self) -> int:
        return self._process.pid

    def launch(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> ForkedProcess:
        """A server running `python -m vllm.entrypoints.openai.api_server` with `argv` after the module."""
        request = {"argv": list(argv), "env": dict(env), "cwd": str(cwd), "log": str(log)}
        return ForkedProcess(self, int(self._ask({"launch": request})["pid"]))

    def status(self, pid: int) -> int | None:
        code = self._ask({"poll": pid})["code"]
        return None if code is None else int(code)

    def close(self) -> None:
        """End the fork server (its servers are the caller's to stop first)."""
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()

    def _ask(self, request: dict[str, object]) -> dict[str, object]:
        with self._lock:
            self._wait_ready()
            stdin, stdout = self._process.stdin, self._process.stdout
            assert stdin is not None and stdout is not None
            try:
                stdin.write(json.dumps(request) + "\n")
                stdin.flush()
            except OSError as exc:
                raise self._failed(f"it took no request ({exc})") from exc
            line = stdout.readline()
            if not line:
                raise self._failed("it exited")
            answer: dict[str, object] = json.loads(line)
            return answer

    def _wait_ready(self) -> None:
        """Once: the first line says vLLM is imported (a bounded wait: a thread reads it)."""
        if self._ready:
            return
        stdout = self._process.stdout
        assert stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(self._import_deadline_s)
        if not first:
            self._process.kill()
            raise self._failed(f"it did not import vLLM within {self._import_deadline_s:.0f} s")
        if first[0].strip() != READY:
            raise self._failed("it exited before vLLM was imported")
        self._ready = True

    def _failed(self, what: str) -> ForkServerError:
        tail = self._log.read_text(errors="replace").splitlines()[-30:] if self._log.exists() else []
        return ForkServerError(f"the vLLM fork server failed: {what}; its log {self._log}:\n" + "\n".join(tail))


# --- the script: the fork server itself, in vLLM's environment ---------------------------------------


def _fork_engine_core() -> None:
    """vLLM starts its engine core by forking this server instead of spawning a fresh interpreter."""
    import multiprocessing

    from vllm.v1.engine import utils as engine_utils  # where the engine core's process is made

    context = multiprocessing.get_context("fork")
    engine_utils.get_mp_context = lambda: context  # type: ignore[attr-defined]


def _run_server(request: Mapping[str, object], requests: IO[str], fork_engine_core: bool) -> None:
    """In the forked child: become the server the request describes; never returns."""
    code = 1
    try:
        requests.close()
        os.setsid()
        die_with_parent()
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for number in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(number, signal.SIG_DFL)
        os.chdir(str(request["cwd"]))
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in dict(request["env"]).items()})  # type: ignore[call-overload]
        import runpy
        import tempfile

        tempfile.tempdir = None  # looked up again, from this server's TMPDIR
        if fork_engine_core:
            _fork_engine_core()
        sys.argv = [SERVER_MODULE, *[str(a) for a in request["argv"]]]  # type: ignore[attr-defined]
        runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # said in the server's log, as the module run directly would say it
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _serve_forks(fork_engine_core: bool) -> None:
    import importlib

    for module in (SERVER_MODULE, *(ENGINE_CORE_MODULES if fork_engine_core else ())):
        importlib.import_module(module)
    out = sys.stdout
    out.write(READY + "\n")
    out.flush()
    ended: dict[int, int] = {}

    def reap() -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            ended[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)

    for line in sys.stdin:
        request = json.loads(line)
        reap()
        if "launch" in request:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _run_server(request["launch"], sys.stdin, fork_engine_core)
            answer: dict[str, object] = {"pid": pid}
        else:
            answer = {"code": ended.get(int(request["poll"]))}
        out.write(json.dumps(answer) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve_forks(FORK_ENGINE_CORE in sys.argv[1:])
