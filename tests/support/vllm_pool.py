"""One vLLM server per distinct (checkpoint, arguments) for the whole test session, shared across files.

A vLLM start on its own command costs 30-38 s of this 2-core machine (quiet), half of it importing
vLLM's API server, and many test files serve the same tiny checkpoint with the same arguments. The
pool forks each server, and each server's engine core, from one process that imported vLLM once
(bench/rigs/vllm_forkserver.py: 8-9 s a start once the first has run), and shares servers. A
`ServerSpec` names one such server: the checkpoint (`Checkpoint`: a name for one build and the
function that builds it) and the arguments `bench.rigs.vllm_server.serve` takes. Equal specs are
one server, whatever file asks for it (`ServerSpec.label` is only its name in test ids and logs).

`VllmPool` (the session fixture `vllm_pool`, tests/conftest.py) starts a spec's server on first
use and keeps it for the next test that asks:

- at most `max_running` at once (HOLODESK_VLLM_SERVERS, default 2; one measured 3.0-3.3 GB of
  proportional memory here), the least recently used stopped to make room;
- a server is stopped right after the last test the session's plan gives it (`plan`, from the
  collected order), so the slow tiers after it do not run beside it;
- while a server's tests run, the next server the order needs (`first_use_order`) is started beside
  it if there is room, so it boots during those tests instead of before its own;
- a server that died is started again (it says so); one that failed to start fails every later
  test that asks for it at once, with the same words, rather than waiting out the deadline again;
- everything is stopped at the session's end, last started first.

`order_items` puts the tests that share a server next to each other (within a module, each
server's tests where its first one was; among the modules that use servers, a module after the one
whose last server it uses first), so that each spec starts once. Module and class blocks are kept
whole, so a module's or class's fixtures are still set up once.

Fixtures: `pooled(spec)` makes a test-file fixture hand out that spec's server (for one spec), or one
of several as pytest parameters (`pooled({"reference": A, "moe": B})`, ids from the keys):

    @pooled(MY_SPEC)
    def clicking() -> None:
        '''The scripted checkpoint that clicks.'''

A test that kills its server, or needs arguments no other test uses and would keep it out of
the pool, keeps a server of its own through `serve` directly.

What a test can see of another through a shared server: prefix caching is off in the rig; a
server keeps no state between requests but its log, which grows (a test that reads the log must
have a server of its own, as the one that kills its engine does), and its /metrics counters.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from xdist import is_xdist_worker
from xdist.workermanage import WorkerController

from bench.rigs.vllm_forkserver import ForkServer
from bench.rigs.vllm_server import (
    ONE_PROCESS_ENGINE_ENV,
    VLLM_PYTHON,
    ServerStartError,
    VllmServer,
    serve,
    server_env,
    wait_ready,
)

MAX_RUNNING = int(os.environ.get("HOLODESK_VLLM_SERVERS", "2"))
POOL_KEY = pytest.StashKey["VllmPool"]()
PLAN_KEY = pytest.StashKey[dict[str, "ServerSpec"]]()  # nodeid of a spec's last test -> the spec
ORDER_KEY = pytest.StashKey[list["ServerSpec"]]()  # the specs in the order of their first tests
STARTS_KEY = pytest.StashKey[list[tuple[str, float]]]()  # (label, seconds its first test waited), in order
WORKER_OUTPUT = "holodesk_vllm_starts"  # the starts, as a parallel worker hands them to the controller


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint build: `name` identifies it for the session (one name, one builder and arguments);
    `build(folder)` writes it under `folder` and returns its path."""

    name: str
    build: Callable[[Path], Path] = field(compare=False, repr=False)


@dataclass(frozen=True)
class ServerSpec:
    """A server: its checkpoint and `serve`'s arguments. Equal specs share one server."""

    label: str = field(compare=False)
    checkpoint: Checkpoint
    dtype: str = "bfloat16"
    max_model_len: int = 32768
    max_images: int = 4
    extra_args: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.label


@dataclass
class _Running:
    server: VllmServer
    stack: ExitStack
    ready: bool  # it answered /health (a server started ahead has not been asked yet)


class VllmPool:
    """The session's vLLM servers (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        max_running: int = MAX_RUNNING,
        plan: Mapping[str, ServerSpec] | None = None,
        order: Sequence[ServerSpec] = (),
    ):
        if max_running < 1:
            raise ValueError(f"HOLODESK_VLLM_SERVERS must be 1 or more, not {max_running}")
        self.root = root
        self.max_running = max_running
        self.plan = dict(plan or {})
        self.order = list(order)  # the specs in the order the session's tests first use them
        self.starts: list[tuple[str, float]] = []  # (label, seconds its first test waited for it), in order
        self._running: dict[ServerSpec, _Running] = {}  # least recently used first
        self._checkpoints: dict[str, Path] = {}
        self._failed: dict[ServerSpec, str] = {}
        # vLLM inspects a model class in a child Python process (10-15 s here) unless its cache has the
        # answer: one cache for the session's servers (a test's own server may use it too), so only the
        # first of an architecture pays. It holds facts about model classes, nothing a test could see.
        self.cache_env = {"VLLM_CACHE_ROOT": str(root / "vllm-cache")}
        self.env = {**self.cache_env, **ONE_PROCESS_ENGINE_ENV}  # one process a server (bench.rigs.vllm_server)
        # Each server forked from one process that imported vLLM's API server once (15 s of a start
        # here), started with the first server: bench/rigs/vllm_forkserver.py.
        self._forkserver: ForkServer | None = None

    def checkpoint(self, checkpoint: Checkpoint) -> Path:
        """The checkpoint's files, built once a session."""
        if checkpoint.name not in self._checkpoints:
            self._checkpoints[checkpoint.name] = checkpoint.build(self.root / "checkpoints" / checkpoint.name)
        return self._checkpoints[checkpoint.name]

    def server(self, spec: ServerSpec) -> VllmServer:
        """The spec's running server, started if it is not (raises ServerStartError in words)."""
        if spec in self._failed:
            raise ServerStartError(f"{self._failed[spec]}\n(this server already failed to start in this session)")
        running = self._running.pop(spec, None)
        if running is not None and not running.ready:
            self._wait(spec, running)
        if running is not None and _alive(running.server):
            self._running[spec] = running  # now the most recently used
            self._start_next(spec)
            return running.server
        if running is not None:
            running.stack.close()
            print(f"\nvLLM server {spec.label} had died; starting it again (log {running.server.log})")
        while len(self._running) >= self.max_running:
            self.stop(next(iter(self._running)))
        started = self._start(spec, wait=True)
        self._start_next(spec)
        return started.server

    def stop(self, spec: ServerSpec) -> None:
        """Stop the spec's server if it runs."""
        running = self._running.pop(spec, None)
        if running is not None:
            running.stack.close()

    def after(self, item: pytest.Item) -> None:
        """Stop the server whose last planned test `item` was."""
        spec = self.plan.get(item.nodeid)
        if spec is not None:
            self.stop(spec)

    def close(self) -> None:
        for spec in reversed(list(self._running)):
            self.stop(spec)
        if self._forkserver is not None:
            self._forkserver.close()

    def launcher(self) -> ForkServer | None:
        """The fork server, started on first use (None without vLLM: `serve` says what to install)."""
        if self._forkserver is None and VLLM_PYTHON.exists():
            folder = self.root / "forkserver"
            folder.mkdir(parents=True, exist_ok=True)
            env = {**server_env(folder), **self.env}
            self._forkserver = ForkServer(VLLM_PYTHON, env, folder / "forkserver.log", fork_engine_core=True)
        return self._forkserver

    def _start(self, spec: ServerSpec, *, wait: bool) -> _Running:
        """Start the spec's server; with `wait`, return once it answers (else it boots on its own)."""
        checkpoint = self.checkpoint(spec.checkpoint)
        work = self.root / "servers" / f"{spec.label}-{len(self.starts) + len(self._running)}"
        stack = ExitStack()
        try:
            server = stack.enter_context(
                serve(
                    checkpoint,
                    work,
                    dtype=spec.dtype,
                    max_model_len=spec.max_model_len,
                    max_images=spec.max_images,
                    extra_args=spec.extra_args,
                    env=self.env,
                    wait=False,
                    launcher=self.launcher(),
                )
            )
        except ServerStartError as exc:
            stack.close()
            self._failed[spec] = str(exc)
            raise
        running = _Running(server, stack, ready=False)
        if wait:
            self._wait(spec, running)
        self._running[spec] = running
        return running

    def _wait(self, spec: ServerSpec, running: _Running) -> None:
        """Wait for a started server to answer /health; a failed start is kept, and said to later tests."""
        waited = time.monotonic()
        try:
            wait_ready(running.server)
        except ServerStartError as exc:
            running.stack.close()
            self._failed[spec] = str(exc)
            raise
        running.ready = True
        self.starts.append((spec.label, time.monotonic() - waited))

    def _start_next(self, spec: ServerSpec) -> None:
        """Start, ahead of its tests, the server the session uses after `spec`'s, if there is room.

        A forked start (8-9 s here, mostly vLLM checking the model and warming up its image processor)
        then overlaps the tests of the server in use instead of adding to them. The room is
        `max_running`, the server in use counted."""
        if spec not in self.order or len(self._running) >= self.max_running:
            return
        later = self.order[self.order.index(spec) + 1 :]
        upcoming = next((s for s in later if s not in self._running and s not in self._failed), None)
        if upcoming is None:
            return
        with suppress(ServerStartError):  # said to the test that asks for it (`_failed`)
            self._start(upcoming, wait=False)


def _alive(server: VllmServer) -> bool:
    if server.process is not None:  # a dead child not yet reaped still answers a signal
        return server.process.poll() is None
    try:
        os.kill(server.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --- fixtures ---------------------------------------------------------------------------------------

_SINGLE: dict[tuple[str, str], ServerSpec] = {}  # (defining module, fixture name) -> its one spec


def pooled(specs: ServerSpec | Mapping[str, ServerSpec]) -> Callable[[Callable[[], None]], object]:
    """Turn a stub function into a fixture of its name that hands out the pool's server for `specs`
    (see the module docstring); the stub's docstring documents the fixture."""

    def make(stub: Callable[[], None]) -> object:
        if isinstance(specs, ServerSpec):
            _SINGLE[(stub.__module__, stub.__name__)] = specs

            def one(vllm_pool: VllmPool) -> VllmServer:
                return serve_or_fail(vllm_pool, specs)

            one.__doc__ = stub.__doc__
            return pytest.fixture(name=stub.__name__)(one)

        def each(request: pytest.FixtureRequest, vllm_pool: VllmPool) -> VllmServer:
            spec = request.param
            assert isinstance(spec, ServerSpec)
            return serve_or_fail(vllm_pool, spec)

        each.__doc__ = stub.__doc__
        return pytest.fixture(name=stub.__name__, params=list(specs.values()), ids=list(specs))(each)

    return make


def serve_or_fail(pool: VllmPool, spec: ServerSpec) -> VllmServer:
    """The spec's server from the pool, or the test failed with the start's own words (no traceback)."""
    try:
        return pool.server(spec)
    except ServerStartError as exc:
        pytest.fail(str(exc), pytrace=False)


def item_specs(item: pytest.Item) -> list[ServerSpec]:
    """The pooled servers a test uses: its parameters that are specs or name a one-spec pooled fixture
    (an indirect parameter a fixture hands to `request.getfixturevalue`), and its one-spec pooled fixtures."""
    found: list[ServerSpec] = []
    if isinstance(item, pytest.Function):
        if hasattr(item, "callspec"):
            for value in item.callspec.params.values():
                spec = value if isinstance(value, ServerSpec) else None
                if isinstance(value, str):
                    spec = _single_for(item, value)
                if spec is not None:
                    found.append(spec)
        for name in item.fixturenames:
            spec = _single_for(item, name)
            if spec is not None:
                found.append(spec)
    return list(dict.fromkeys(found))


def _single_for(item: pytest.Function, name: str) -> ServerSpec | None:
    """The one-spec fixture `name` as pytest resolves it for `item`: the test's own module's, else the
    nearest conftest's."""
    module = item.module.__name__ if item.module is not None else ""
    if (module, name) in _SINGLE:
        return _SINGLE[(module, name)]
    candidates = [
        (owner, spec)
        for (owner, fixture), spec in _SINGLE.items()
        if fixture == name and owner.endswith("conftest") and module.startswith(owner.removesuffix("conftest"))
    ]
    return max(candidates, key=lambda c: len(c[0]))[1] if candidates else None


# --- ordering -------------------------------------------------------------------------------------


def order_items(items: list[pytest.Item]) -> None:
    """Reorder `items` in place so that the tests sharing a server are adjacent (module docstring)."""
    blocks: list[list[pytest.Item]] = []
    for item in items:
        if blocks and blocks[-1][0].path == item.path:
            blocks[-1].append(item)
        else:
            blocks.append([item])
    keyed = [i for i, block in enumerate(blocks) if _specs_of(block)]
    waiting = [blocks[i] for i in keyed]
    chain: list[list[pytest.Item]] = []
    last: ServerSpec | None = None
    while waiting:
        # Next: the first waiting module that uses the server the previous one ended with.
        pick = next((block for block in waiting if last in _specs_of(block)), waiting[0])
        waiting.remove(pick)
        later = {spec for block in waiting for spec in _specs_of(block)}
        ordered = _group_within(pick, first=last, later=later)
        chain.append(ordered)
        last = _specs_of(ordered)[-1]
    for slot, block in zip(keyed, chain, strict=True):
        blocks[slot] = block
    items[:] = [item for block in blocks for item in block]


def _specs_of(block: Sequence[pytest.Item]) -> list[ServerSpec]:
    return list(dict.fromkeys(spec for item in block for spec in item_specs(item)))


def _group_within(block: Sequence[pytest.Item], first: ServerSpec | None, later: set[ServerSpec]) -> list[pytest.Item]:
    """A module's tests, each server's next to its first; the server the previous module ended with
    first of all and one a later module uses last. A class's tests stay together (grouped the same
    way among themselves), so its fixtures are still set up once."""
    runs: list[list[pytest.Item]] = []
    for item in block:
        in_class = isinstance(item.parent, pytest.Class)
        if runs and in_class and runs[-1][0].parent is item.parent:
            runs[-1].append(item)
        else:
            runs.append([item])
    units = [_group_units([[item] for item in run], first, later) if len(run) > 1 else run for run in runs]
    return _group_units(units, first, later)


def _group_units(units: list[list[pytest.Item]], first: ServerSpec | None, later: set[ServerSpec]) -> list[pytest.Item]:
    seen: dict[ServerSpec, int] = {}
    keys: list[int] = []
    for index, unit in enumerate(units):
        specs = _specs_of(unit)
        if not specs:
            keys.append(index)  # a test without a server stays where it was
            continue
        position = seen.setdefault(specs[0], index)
        keys.append(-1 if specs[0] == first else position + len(units) * (specs[-1] in later))
    order = sorted(range(len(units)), key=lambda i: keys[i])
    return [item for i in order for item in units[i]]


def plan(items: Sequence[pytest.Item]) -> dict[str, ServerSpec]:
    """Each pooled server's last test in the final order, by node id."""
    last: dict[ServerSpec, str] = {}
    for item in items:
        for spec in item_specs(item):
            last[spec] = item.nodeid
    return {nodeid: spec for spec, nodeid in last.items()}


def first_use_order(items: Sequence[pytest.Item]) -> list[ServerSpec]:
    """The pooled servers in the order the session's tests first use them (which one to start ahead)."""
    return list(dict.fromkeys(spec for item in items for spec in item_specs(item)))


def open_pool(config: pytest.Config, root: Path) -> Iterator[VllmPool]:
    """The session's pool (tests/conftest.py's `vllm_pool`), stopped at the end."""
    pool = VllmPool(root, plan=config.stash.get(PLAN_KEY, {}), order=config.stash.get(ORDER_KEY, []))
    config.stash[POOL_KEY] = pool
    config.stash[STARTS_KEY] = pool.starts
    try:
        yield pool
    finally:
        pool.close()
        del config.stash[POOL_KEY]


def summary(config: pytest.Config) -> str | None:
    """One line for the end of the run: the servers the pool started and how long their tests waited for each."""
    starts = config.stash.get(STARTS_KEY, [])
    if not starts:
        return None
    each = ", ".join(f"{label} {seconds:.0f} s" for label, seconds in starts)
    total = sum(s for _, s in starts)
    return f"vLLM servers the pool started: {len(starts)}; their tests waited {total:.0f} s for them ({each})"


class PoolPlugin:
    """The pool's pytest hooks, registered by tests/conftest.py."""

    @pytest.hookimpl(trylast=True)  # after pytest's own ordering of parametrized fixtures
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        order_items(items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        session.config.stash[PLAN_KEY] = plan(session.items)
        session.config.stash[ORDER_KEY] = first_use_order(session.items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        try:
            yield
        finally:
            pool = item.config.stash.get(POOL_KEY, None)
            if pool is not None:
                pool.after(item)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        # On a parallel worker the summary line would be lost with the worker's terminal: hand the
        # starts to the controller (pytest_testnodedown below), which prints it.
        if is_xdist_worker(session):
            session.config.workeroutput[WORKER_OUTPUT] = session.config.stash.get(STARTS_KEY, [])  # type: ignore[attr-defined]

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: absent when pytest runs without it
    def pytest_testnodedown(self, node: WorkerController, error: object) -> None:
        if error is not None:
            # The worker died (xdist reports why: its words, the test it was running). Only a worker
            # that finished sent its output: a dead one has no `workeroutput`, and no starts to hand over.
            return
        starts = node.workeroutput.get(WORKER_OUTPUT)
        if starts:
            node.config.stash[STARTS_KEY] = [(str(label), float(seconds)) for label, seconds in starts]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
        line = summary(config)
        if line:
            terminalreporter.write_line(line)
