"""MiniWoB workers on a Ray cluster: one actor per desktop, each episode one actor task.

Each actor (`DesktopActor`) needs one unit of the custom resource `holodesk_desktop`, so Ray places
desktops only on nodes started to offer them (`ray start --resources '{"holodesk_desktop": 4}'`) and
never more than a node says it can hold. Inside, the actor starts an ordinary local worker process
(app/eval/workers.py) on its node: its own Xvfb, openbox, Chromium and step engine. An episode is a
call of the actor's `run`; its result and packed trajectory folder come back to the command, which
unpacks it where it runs. When the actor, its worker process or its node dies mid-episode, the call
fails with one of Ray's errors: that is a `WorkerLost` here, and the scheduler (app/eval/parallel.py)
starts a fresh actor (Ray places it on a node that is alive) and runs the episode again.

Ray is optional: `pip install 'holodesk[cluster]'`. Without it `--ray` says so and nothing else changes.
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from types import ModuleType
from typing import Protocol, runtime_checkable

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.install_advice import install_extra
from holodesk.app.eval.workers import (
    EpisodeDone,
    EpisodeError,
    EpisodeJob,
    LocalWorker,
    WorkerLost,
    WorkerSetup,
    WorkerStartError,
)

DESKTOP_RESOURCE = "holodesk_desktop"
_INSTALL_RAY = install_extra("cluster")
MISSING_RAY = f"--ray needs Ray, which the base install leaves out: install Holodesk's cluster extra, {_INSTALL_RAY}"


@runtime_checkable
class _HasCause(Protocol):
    """Ray's task and actor errors: the exception raised in the worker, where Ray kept it."""

    cause: object


class ClusterError(HolodeskAppError):
    """Ray is missing, the cluster cannot be reached, or no node offers desktops; the message says which."""


def import_ray() -> ModuleType:
    """The ray module, or a ClusterError naming the extra that installs it."""
    try:
        import ray
    except ImportError:
        raise ClusterError(MISSING_RAY) from None
    return ray


class DesktopActor:
    """The actor's body: one local worker process on this node, kept for the actor's life."""

    def __init__(self, setup: WorkerSetup) -> None:
        self.worker = LocalWorker(setup)

    def where(self) -> str:
        """The worker's host and display, and the Ray node it is on."""
        import ray

        return f"{self.worker.where} (ray node {ray.get_runtime_context().get_node_id()[:12]})"

    def run(self, job: EpisodeJob) -> EpisodeDone:
        return self.worker.run(job)

    def close(self) -> None:
        self.worker.close()


class RayRunner:
    """An EpisodeRunner whose worker is a `DesktopActor` somewhere on the cluster."""

    def __init__(self, ray: ModuleType, actor_class: object, setup: WorkerSetup, start_timeout_s: float) -> None:
        self._ray = ray
        # One desktop each: the custom resource decides where it may go; no CPU is reserved, since
        # an actor mostly waits on its worker process (which Ray does not count). SPREAD: desktops
        # go to different nodes while there are free ones, rather than filling the first. Ray
        # itself never restarts or retries: the scheduler does, counting each episode once.
        self._actor = actor_class.options(  # type: ignore[attr-defined]
            resources={DESKTOP_RESOURCE: 1},
            num_cpus=0,
            scheduling_strategy="SPREAD",
            max_restarts=0,
            max_task_retries=0,
        ).remote(setup)
        try:
            self.where = str(ray.get(self._actor.where.remote(), timeout=start_timeout_s))
        except ray.exceptions.GetTimeoutError:
            self.close()
            raise WorkerStartError(
                f"no desktop actor started within {start_timeout_s:g} s: do the cluster's nodes offer the "
                f"{DESKTOP_RESOURCE} resource, all of it taken?"
            ) from None
        except ray.exceptions.RayTaskError as exc:
            self.close()
            raise WorkerStartError(f"a desktop actor could not start: {_cause(exc)}") from None
        except ray.exceptions.RayActorError as exc:  # placed on a node that died (Ray had not seen it yet)
            self.close()
            raise WorkerLost(f"a desktop actor died while starting: {_cause(exc)}") from None
        except ray.exceptions.RayError as exc:
            self.close()
            raise WorkerStartError(f"a desktop actor could not start: {exc}") from None

    def run(self, job: EpisodeJob) -> EpisodeDone:
        ray = self._ray
        try:
            done = ray.get(self._actor.run.remote(job))
        except ray.exceptions.RayTaskError as exc:  # raised inside the actor: the worker's own verdict
            cause = exc.cause if isinstance(exc.cause, BaseException) else None
            if isinstance(cause, EpisodeError):
                raise EpisodeError(str(cause)) from None
            raise WorkerLost(f"episode {job.task} seed {job.seed} on {self.where}: {_cause(exc)}") from None
        except ray.exceptions.RayError as exc:  # the actor or its node died (RayActorError, ActorDiedError...)
            raise WorkerLost(
                f"episode {job.task} seed {job.seed}: the actor on {self.where} died ({type(exc).__name__})"
            ) from None
        if not isinstance(done, EpisodeDone):
            raise WorkerLost(f"the actor on {self.where} answered with {type(done).__name__}")
        return replace(done, worker=self.where)  # with the node it ran on

    def stop(self) -> None:
        """End the actor now (its worker process and desktop go with it: see episode_worker's reaper)."""
        with contextlib.suppress(self._ray.exceptions.RayError):
            self._ray.kill(self._actor)

    def close(self) -> None:
        ray = self._ray
        with contextlib.suppress(ray.exceptions.RayError):  # gone already: the usual case after a loss
            ray.get(self._actor.close.remote(), timeout=30)
        with contextlib.suppress(ray.exceptions.RayError):
            ray.kill(self._actor)


def _cause(exc: Exception) -> str:
    """The last line of what went wrong inside Ray: the task's own exception where Ray kept it."""
    cause = exc.cause if isinstance(exc, _HasCause) else None
    text = str(cause if isinstance(cause, BaseException) else exc).strip()
    return text.splitlines()[-1] if text else type(exc).__name__


class RayDesktops:
    """Connects to the cluster at `address` ("auto": the one `ray start` runs here) and starts actors on it."""

    def __init__(self, address: str, setup: WorkerSetup, *, start_timeout_s: float = 300.0) -> None:
        ray = import_ray()
        self._ray = ray
        self._setup = setup
        self._start_timeout_s = start_timeout_s
        self._connected_here = False
        if not ray.is_initialized():
            try:
                ray.init(address=address, log_to_driver=False, logging_level="ERROR")
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterError(
                    f"cannot reach the Ray cluster at {address!r}: {exc} (start one with `ray start --head "
                    f"--resources '{{\"{DESKTOP_RESOURCE}\": 2}}'`, or name its address)"
                ) from None
            self._connected_here = True
        offered = ray.cluster_resources().get(DESKTOP_RESOURCE, 0)
        if offered < 1:
            self.close()
            raise ClusterError(
                f"no node of the Ray cluster offers the {DESKTOP_RESOURCE} resource: start the nodes that may "
                f"run desktops with `ray start ... --resources '{{\"{DESKTOP_RESOURCE}\": N}}'`"
            )
        self.offered = int(offered)
        self._actor_class = ray.remote(DesktopActor)

    def start(self, slot: int) -> RayRunner:
        return RayRunner(self._ray, self._actor_class, self._setup, self._start_timeout_s)

    def close(self) -> None:
        if self._connected_here:
            self._ray.shutdown()
