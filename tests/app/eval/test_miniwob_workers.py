"""`holodesk eval miniwob --workers N`: MiniWoB episodes on several private desktops at once.

Each worker is its own process with its own Xvfb, openbox, Chromium, input backend and step engine
(app/eval/workers.py); the DOM oracle (tests/app/eval/oracle_source.py) answers in each, so the page's
own reward decides every episode, and a click or a typed key that went to the wrong display would
lose one. Nothing here sets DISPLAY: the workers name their desktops themselves.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer, SlowReply
from holodesk.app.cli.main import main
from holodesk.app.eval.miniwob_eval import MiniWoBOptions
from holodesk.app.eval.parallel import ParallelRun, jobs_for
from holodesk.app.eval.workers import LocalWorker, WorkerSetup, WorkerStartError
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.app.eval.oracle_source import OracleSource
from tests.support.holodesk_command import HOLODESK_COMMAND, ctrl_c_and_wait, ctrl_c_as_from_a_terminal
from tests.support.processes import children_of, processes_in_group
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.display, pytest.mark.chromium]


def test_two_workers_win_episodes_on_their_own_desktops(tmp_path):
    display_before = os.environ.get("DISPLAY")
    options = MiniWoBOptions(tasks=("click-button", "enter-text"), episodes=2, seed=3, zoom=2)
    setup = WorkerSetup(options=options, policy=OracleSource(), session_meta={"backend": "oracle"})
    run = ParallelRun(jobs_for(options), lambda slot: LocalWorker(setup), 2, tmp_path / "sessions")
    report = run.run()

    print("\n" + report.table())
    assert [(e.task, e.seed) for e in report.episodes] == [
        ("click-button", 3), ("click-button", 4), ("enter-text", 3), ("enter-text", 4),
    ]  # fmt: skip
    lost = [(e.task, e.seed, e.outcome, e.detail) for e in report.episodes if not e.success]
    assert lost == [], report.table()
    assert all(e.outcome == "episode_ended" and e.steps >= 1 for e in report.episodes)
    assert report.retried == 0
    # Two desktops, each its own X display.
    assert len(set(run.where.values())) == 2, run.where
    assert os.environ.get("DISPLAY") == display_before
    # Every episode's trajectory came back whole, one session folder each, under the command's root.
    folders = list(iter_session_folders(tmp_path / "sessions"))
    assert sorted(str(f) for f in folders) == sorted(str(e.trajectory) for e in report.episodes)
    for folder in folders:
        session = read_session(folder)
        assert session.header["settings"]["eval"] == "miniwob"
        assert session.steps and all((folder / step["screenshot"]).is_file() for step in session.steps)
    assert not [p for p in (tmp_path / "sessions").iterdir() if p.name.startswith(".incoming")]


def test_a_worker_that_dies_mid_episode_is_replaced_and_its_episode_run_again_once(tmp_path):
    options = MiniWoBOptions(tasks=("click-button",), episodes=3, seed=20, zoom=2)
    marker = tmp_path / "crashed"
    setup = WorkerSetup(options=options, policy=OracleSource(marker=marker))
    run = ParallelRun(jobs_for(options), lambda slot: LocalWorker(setup), 2, tmp_path / "sessions")
    report = run.run()

    assert marker.is_file()  # one worker did die at its first step
    assert [e.seed for e in report.episodes] == [20, 21, 22]
    assert all(e.success for e in report.episodes), report.table()
    assert report.retried == 1
    assert "1 episode(s) were run again" in report.table()
    # The crashed try left nothing behind: one folder per episode, and no process of its desktop
    # (Xvfb, openbox, chromedriver, Chromium: the dead worker's process group, ended by its reaper).
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 3
    dead_worker = int(marker.read_text().split()[0])
    wait_until(lambda: not processes_in_group(dead_worker), 15, "the crashed worker's desktop to be gone")


def test_a_worker_that_cannot_start_says_why_in_words():
    options = MiniWoBOptions(tasks=("click-button",), episodes=1)
    with pytest.raises(WorkerStartError, match="install Debian's `chromium`"):
        LocalWorker(WorkerSetup(options=options, policy=OracleSource(), chromium="no-such-chromium"))


def test_the_command_with_two_workers_prints_the_table_and_writes_json(tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    answers.write_text((json.dumps(corner) + "\n") * 4, encoding="utf-8")
    results = tmp_path / "results.json"
    code = main(
        [
            "eval", "miniwob", "--tasks", "click-button,focus-text", "--episodes", "2", "--max-steps", "1",
            "--zoom", "2", "--backend", "scripted", "--script", str(answers), "--workers", "2",
            "--json", str(results), "--sessions", str(tmp_path / "sessions"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "click-button" in captured.out and "focus-text" in captured.out
    assert "4/4 episodes" in captured.err
    written = json.loads(results.read_text())
    assert written["episodes_run"] == 4 and written["success_rate"] == 0 and written["retried"] == 0
    assert [e["outcome"] for e in written["episodes"]] == ["step_limit"] * 4
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4


def test_ctrl_c_ends_the_workers_and_their_desktops_mid_episode(tmp_path):
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    with FakeOpenAIServer() as server:
        server.default_reply = SlowReply(120, Completion(text=corner))  # both workers wait on their first step
        # faulthandler: a command that outlives Ctrl+C is made to print every thread's stack (SIGABRT) below.
        python, *module = HOLODESK_COMMAND
        command = subprocess.Popen(
            [python, "-X", "faulthandler", *module, "eval", "miniwob", "--tasks", "click-button", "--episodes", "4",
             "--zoom", "2", "--workers", "2", "--backend", "remote", "--base-url", server.base_url,
             "--sessions", str(tmp_path / "sessions")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "HOLODESK_API_KEY": "test-key"},
            preexec_fn=ctrl_c_as_from_a_terminal,
        )  # fmt: skip
        try:
            wait_until(lambda: len(server.chat_requests) >= 2, 120, "both workers to ask for a step")
            workers = children_of(command.pid)
            assert len(workers) == 2, workers
            err = ctrl_c_and_wait(
                command, 60, lambda: f"workers' groups alive: {[w for w in workers if processes_in_group(w)]}"
            )
        finally:
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 3, err
    assert "stopped (Ctrl+C) after 0 episodes" in err
    for worker in workers:  # each worker led its own process group: its desktop went with it
        wait_until(lambda worker=worker: not processes_in_group(worker), 15, "the workers' desktops to be gone")
