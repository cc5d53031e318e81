"""The parallel eval's scheduler and trajectory transport, with stand-in workers (no display).

Real workers on real desktops are in test_miniwob_workers.py; here each worker is an in-process
stand-in that finishes every episode. Workers that die (and the step that turns a death into
`WorkerLost`, which these stand-ins must not take for themselves) are real processes in
test_worker_deaths.py.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from holodesk.app.eval.miniwob_eval import EpisodeResult, MiniWoBOptions
from holodesk.app.eval.parallel import ParallelRun, jobs_for
from holodesk.app.eval.workers import (
    EpisodeDone,
    EpisodeError,
    EpisodeJob,
    WorkerStartError,
    pack_trajectory,
    unpack_trajectory,
)
from holodesk.automation.trajectory import TrajectoryWriter, iter_session_folders, read_session


def _result(job: EpisodeJob) -> EpisodeResult:
    return EpisodeResult(job.task, job.seed, "do it", True, 0.9, 1.0, 1, "episode_ended", "", 0.1, None)


class StandIn:
    """Finishes every episode with a one-line trajectory."""

    def __init__(self, folder: Path, log: list[tuple[int, int]], slot: int) -> None:
        self.folder, self.log, self.slot = folder, log, slot
        self.closed = False

    def run(self, job: EpisodeJob) -> EpisodeDone:
        self.log.append((self.slot, job.index))
        writer = TrajectoryWriter.create(self.folder, f"{job.task} {job.seed}")
        writer.close()
        archive = pack_trajectory(writer.folder)
        return EpisodeDone(job, _result(job), writer.folder.name, archive, f"slot {self.slot}")

    def stop(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _run(tmp_path: Path, *, attempts: int = 3, episodes: int = 4) -> tuple[ParallelRun, list]:
    log: list[tuple[int, int]] = []
    started: list[StandIn] = []
    lock = threading.Lock()

    def start(slot: int) -> StandIn:
        with lock:
            runner = StandIn(tmp_path / "worker" / str(len(started)), log, slot)
            started.append(runner)
            return runner

    options = MiniWoBOptions(tasks=("click-button", "focus-text"), episodes=episodes // 2)
    return ParallelRun(jobs_for(options), start, 2, tmp_path / "sessions", max_attempts=attempts), started


def test_every_episode_is_counted_once_in_the_commands_order(tmp_path):
    run, started = _run(tmp_path)
    report = run.run()
    assert [(e.task, e.seed) for e in report.episodes] == [
        ("click-button", 0), ("click-button", 1), ("focus-text", 0), ("focus-text", 1),
    ]  # fmt: skip
    assert report.retried == 0 and len(started) == 2 and all(runner.closed for runner in started)
    folders = list(iter_session_folders(tmp_path / "sessions"))
    assert sorted(map(str, folders)) == sorted(str(e.trajectory) for e in report.episodes)
    assert read_session(folders[0]).task


def test_a_worker_that_cannot_start_stops_the_run_in_words(tmp_path):
    def start(slot: int) -> StandIn:
        raise WorkerStartError("no Chromium here")

    run = ParallelRun(jobs_for(MiniWoBOptions(tasks=("click-button",), episodes=2)), start, 2, tmp_path)
    with pytest.raises(EpisodeError, match="no Chromium here"):
        run.run()


def test_an_unpacked_trajectory_appears_whole_or_not_at_all(tmp_path):
    writer = TrajectoryWriter.create(tmp_path / "worker", "click the button")
    writer.close()
    archive = pack_trajectory(writer.folder)
    target = unpack_trajectory(archive, writer.folder.name, tmp_path / "sessions")
    assert read_session(target).task == "click the button"
    with pytest.raises(FileExistsError):  # the same episode twice is refused, not merged
        unpack_trajectory(archive, writer.folder.name, tmp_path / "sessions")
    with pytest.raises(ValueError):
        unpack_trajectory(archive, "../elsewhere", tmp_path / "sessions")
    assert [p.name for p in (tmp_path / "sessions").iterdir()] == [writer.folder.name]


def test_ray_missing_is_said_with_the_extra_that_brings_it(tmp_path, capsys, monkeypatch):
    import sys

    from holodesk.app.cli.main import main

    monkeypatch.setitem(sys.modules, "ray", None)  # as on a base install: `import ray` fails
    answers = tmp_path / "answers.jsonl"
    answers.write_text('"{}"\n', encoding="utf-8")
    arguments = ["eval", "miniwob", "--tasks", "click-button", "--ray", "auto"]
    code = main([*arguments, "--backend", "scripted", "--script", str(answers)])
    assert code == 2
    err = capsys.readouterr().err
    assert "pip install 'holodesk[cluster]'" in err and "--ray needs Ray" in err
