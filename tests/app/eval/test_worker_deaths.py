"""A parallel eval's workers die the ways real ones do, with no display: the fast tier's check of the
step that turns a dead worker, or a worker whose desktop lost a part, into `WorkerLost`.

Each worker is a real process (tests/app/eval/standin_worker.py) started by the real `LocalWorker`,
with the real reaper and job loop; only its desktop is a stand-in (a `sleep` for Chromium). It never
says `WorkerLost` itself: it exits, or its Chromium is killed and the episode raises the page's error.
Real desktops, Chromium and Xvfb killed from outside, are in test_miniwob_deaths.py.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from holodesk.app.eval.miniwob_eval import MiniWoBOptions
from holodesk.app.eval.parallel import ParallelRun, jobs_for
from holodesk.app.eval.workers import EpisodeError, EpisodeJob, LocalWorker, WorkerLost, WorkerSetup
from holodesk.automation.trajectory import iter_session_folders
from tests.app.eval.oracle_source import OracleSource
from tests.support.waiting import wait_until


def running_in_group(group: int) -> list[str]:
    """Names of the processes of `group` that still run (a dead one its parent has not collected yet,
    a zombie, has stopped: the worker stays one until its parent's next look)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            text = (entry / "stat").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        if not text:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[2]) == group and fields[0] != "Z":  # state, parent, group, ...
            found.append(text[text.index("(") + 1 : text.rindex(")")])
    return found


STANDIN = Path(__file__).with_name("standin_worker.py")
OPTIONS = MiniWoBOptions(tasks=("click-button", "focus-text"), episodes=2)


@pytest.fixture
def temp_root(tmp_path, monkeypatch) -> Path:
    """The folder every worker's root goes in (this process's temp folder), empty at the start."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(folder))
    return folder


def _worker(tmp_path: Path, *on: str) -> LocalWorker:
    claims = tmp_path / "claims"
    claims.mkdir(exist_ok=True)
    return LocalWorker(_setup(claims, *on), start_timeout_s=60)


def _setup(claims: Path, *on: str) -> WorkerSetup:
    """A setup whose workers are stand-ins (run by path: a Ray actor's folder is not this one)."""
    command = [sys.executable, str(STANDIN), "--claims", str(claims)]
    for item in on:
        command += ["--on", item]
    return WorkerSetup(options=OPTIONS, policy=OracleSource(), worker_command=tuple(command))


def _run(tmp_path: Path, *on: str) -> tuple[ParallelRun, list[LocalWorker]]:
    """A run of OPTIONS on two stand-in workers, and the list of every worker it starts."""
    started: list[LocalWorker] = []

    def start(slot: int) -> LocalWorker:
        worker = _worker(tmp_path, *on)
        started.append(worker)
        return worker

    return ParallelRun(jobs_for(OPTIONS), start, 2, tmp_path / "sessions"), started


def test_a_worker_that_exits_mid_episode_is_lost_and_its_episode_runs_again_once(tmp_path, temp_root):
    run, started = _run(tmp_path, "1=exit")
    report = run.run()
    assert [(e.task, e.seed, e.success) for e in report.episodes] == [
        ("click-button", 0, True), ("click-button", 1, True), ("focus-text", 0, True), ("focus-text", 1, True),
    ]  # fmt: skip
    assert report.retried == 1 and report.to_json()["retried"] == 1
    assert "1 episode(s) were run again" in report.table()
    assert len(started) == 3  # the dead worker was replaced
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4
    assert list(temp_root.iterdir()) == []  # every worker's root went with it


def test_a_dead_chromium_gives_up_the_desktop_and_its_episode_runs_again_once(tmp_path, temp_root):
    run, started = _run(tmp_path, "2=chromium")
    report = run.run()
    assert all(e.success for e in report.episodes) and len(report.episodes) == 4
    assert report.retried == 1 and len(started) == 3
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4
    assert list(temp_root.iterdir()) == []


def test_an_episode_whose_chromium_dies_on_every_try_is_one_failure_in_words_and_the_run_goes_on(tmp_path):
    run, _ = _run(tmp_path, "0=chromium!")
    report = run.run()
    assert len(report.episodes) == 4
    [failed] = [e for e in report.episodes if not e.success]
    assert (failed.task, failed.seed, failed.outcome) == ("click-button", 0, "error")
    assert "died on each of 3 tries" in failed.detail
    assert "Chromium (pid " in failed.detail and "killed by signal 9" in failed.detail
    assert "invalid session id" in failed.detail
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 3


def test_a_page_that_fails_on_a_whole_desktop_still_stops_the_run_in_words(tmp_path):
    run, _ = _run(tmp_path, "1=refuse")
    with pytest.raises(EpisodeError, match="did not load: net::ERR_FILE_NOT_FOUND"):
        run.run()
    assert run.retried == 0


def _hang(tmp_path: Path) -> tuple[LocalWorker, list[BaseException], threading.Thread]:
    worker = _worker(tmp_path, "0=hang")
    raised: list[BaseException] = []

    def run() -> None:
        try:
            worker.run(EpisodeJob(0, "click-button", 0))
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    wait_until((tmp_path / "claims" / "hanging").is_file, 30, "the worker to be mid-episode")
    return worker, raised, thread


def _chromium_scratch(root: Path) -> list[Path]:
    return list(root.glob("hd-chromium-*"))


def test_a_sigkilled_worker_is_lost_and_its_reaper_ends_its_processes_and_removes_its_folders(tmp_path, temp_root):
    worker, raised, thread = _hang(tmp_path)
    assert _chromium_scratch(worker.root)
    os.kill(worker.pid, signal.SIGKILL)
    thread.join(timeout=30)
    [lost] = raised
    assert isinstance(lost, WorkerLost) and "exit status -9" in str(lost)
    # The reaper, not the parent: before close() it has ended the group and removed all but the log.
    wait_until(lambda: running_in_group(worker.pid) == [], 15, "the worker's group to end")
    wait_until(lambda: not _chromium_scratch(worker.root), 15, "the reaper to remove the worker's folders")
    assert [p.name for p in worker.root.iterdir()] == ["worker.log"]
    worker.close()
    assert list(temp_root.iterdir()) == []


def test_a_worker_killed_with_its_reaper_is_cleaned_up_by_its_parent(tmp_path, temp_root):
    worker, raised, thread = _hang(tmp_path)
    os.killpg(worker.pid, signal.SIGKILL)  # the whole group: the reaper too
    thread.join(timeout=30)
    assert isinstance(raised[0], WorkerLost)
    wait_until(lambda: running_in_group(worker.pid) == [], 15, "the worker's group to end")
    assert _chromium_scratch(worker.root)  # nobody was left to remove it ...
    worker.close()
    assert list(temp_root.iterdir()) == []  # ... but its parent


def test_a_worker_whose_parent_dies_mid_episode_is_ended_by_its_reaper(tmp_path):
    """The parent here is a throwaway process waiting on a LocalWorker's episode, killed with SIGKILL:
    the worker, busy, would never notice (it reads its inbox only between episodes)."""
    import subprocess

    claims = tmp_path / "claims"
    claims.mkdir()
    program = (
        "import sys, tempfile, time\n"
        "from holodesk.app.eval.workers import EpisodeJob, LocalWorker, WorkerSetup\n"
        "from holodesk.app.eval.miniwob_eval import MiniWoBOptions\n"
        "from tests.app.eval.oracle_source import OracleSource\n"
        f"tempfile.tempdir = {str(tmp_path / 'tmp')!r}\n"
        "w = LocalWorker(WorkerSetup(options=MiniWoBOptions(tasks=('click-button',)), policy=OracleSource(),\n"
        f"    worker_command=(sys.executable, {str(STANDIN)!r}, '--claims', {str(claims)!r}, '--on', '0=hang')))\n"
        "print(w.pid, flush=True)\n"
        "w.run(EpisodeJob(0, 'click-button', 0))\n"
    )
    (tmp_path / "tmp").mkdir()
    parent = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        wait_until((claims / "hanging").is_file, 30, "the worker to be mid-episode")
        parent.kill()
        parent.wait()
        wait_until(lambda: running_in_group(worker_pid) == [], 15, "the orphaned worker's group to end")
        wait_until(lambda: list((tmp_path / "tmp").iterdir()) == [], 15, "its root, log included, to be removed")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


def test_on_ray_a_stand_in_that_exits_or_loses_its_chromium_is_lost_and_its_episode_runs_again(tmp_path):
    """The same deaths inside Ray actors (a one-node cluster in this process): Ray's error for the
    actor's task is what must become WorkerLost here."""
    ray = pytest.importorskip("ray")  # the fast tier's set-up installs the cluster extra
    from holodesk.app.eval.ray_backend import DESKTOP_RESOURCE, RayDesktops

    claims = tmp_path / "claims"
    claims.mkdir()
    # "local": a new cluster here, even where an earlier test's RAY_ADDRESS is still set
    ray.init(address="local", num_cpus=1, resources={DESKTOP_RESOURCE: 2}, include_dashboard=False, log_to_driver=False)
    try:
        desktops = RayDesktops("auto", _setup(claims, "1=exit", "2=chromium"))
        run = ParallelRun(jobs_for(OPTIONS), desktops.start, 2, tmp_path / "sessions")
        report = run.run()
    finally:
        ray.shutdown()
    assert [(e.task, e.seed, e.success) for e in report.episodes] == [
        ("click-button", 0, True), ("click-button", 1, True), ("focus-text", 0, True), ("focus-text", 1, True),
    ]  # fmt: skip
    assert report.retried == 2
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4


def test_a_worker_killed_while_its_parent_lives_leaves_nothing_when_the_parent_then_dies(tmp_path):
    """The reaper keeps the log for a living parent; a parent that dies before closing the worker (a
    Ray actor ended with its node) must not leave the root behind."""
    import subprocess

    claims = tmp_path / "claims"
    claims.mkdir()
    (tmp_path / "tmp").mkdir()
    program = (
        "import sys, tempfile, time\n"
        "from holodesk.app.eval.workers import EpisodeJob, LocalWorker, WorkerSetup\n"
        "from holodesk.app.eval.miniwob_eval import MiniWoBOptions\n"
        "from tests.app.eval.oracle_source import OracleSource\n"
        f"tempfile.tempdir = {str(tmp_path / 'tmp')!r}\n"
        "w = LocalWorker(WorkerSetup(options=MiniWoBOptions(tasks=('click-button',)), policy=OracleSource(),\n"
        f"    worker_command=(sys.executable, {str(STANDIN)!r}, '--claims', {str(claims)!r}, '--on', '0=hang')))\n"
        "print(w.pid, flush=True)\n"
        "try:\n"
        "    w.run(EpisodeJob(0, 'click-button', 0))\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        worker_pid = int(parent.stdout.readline())
        wait_until((claims / "hanging").is_file, 30, "the worker to be mid-episode")
        os.kill(worker_pid, signal.SIGKILL)
        assert parent.stdout.readline().strip() == "WorkerLost"
        [root] = list((tmp_path / "tmp").iterdir())
        wait_until(lambda: [p.name for p in root.iterdir()] == ["worker.log"], 15, "all but the log to be removed")
        parent.kill()  # never closes the worker
        parent.wait()
        wait_until(lambda: not root.exists(), 15, "the root to be removed once its parent is gone")
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
