"""`holodesk eval miniwob`: MiniWoB++ pages in a real Chromium under Xvfb, driven by the step engine.

The oracle (bench/rigs/miniwob_oracle.py) reads the DOM and answers in holotron's text format;
the profile parses it, the engine maps it, the input performer clicks and types through XTEST, and the
task's own JavaScript decides the reward. A wrong mapping or input performer loses episodes here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.miniwob_oracle import ORACLE_TASKS, MiniWoBOracle
from holodesk.app.cli.main import main
from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.app.eval.miniwob_eval import MiniWoBEvaluation, MiniWoBOptions
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.trajectory import iter_session_folders, read_session
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.scripted import ScriptedBackend

pytestmark = [
    pytest.mark.display,
    pytest.mark.parametrize("xvfb", [DisplayLayout(1024, 768)], indirect=True, ids=str, scope="module"),
]

EPISODES_PER_TASK = 3


@pytest.fixture(scope="module")
def browser(xvfb: XvfbServer) -> Iterator[MiniWoBBrowser]:
    with MiniWoBBrowser(zoom=3) as opened:
        yield opened


def evaluation(browser: MiniWoBBrowser, backend, tasks, tmp_path: Path, **options) -> MiniWoBEvaluation:
    capture = ScreenCapture()
    return MiniWoBEvaluation(
        browser,
        ModelPolicy(get_profile("holotron"), backend),
        InputPerformer(X11Input(capture=capture)),
        capture,
        MiniWoBOptions(tasks=tuple(tasks), **options),
        trajectory_root=tmp_path / "sessions",
        session_meta={"backend": "oracle"},
    )


def test_the_oracle_solves_every_episode_of_thirteen_kinds_of_task(browser, tmp_path):
    # The oracle computes its coordinates without the product's mapping (see its docstring): every
    # episode must succeed, so one convention error in the product, in either direction, fails here.
    oracle = MiniWoBOracle(browser, ScreenCapture().monitors()[0].rect)
    report = evaluation(browser, oracle, ORACLE_TASKS, tmp_path, episodes=EPISODES_PER_TASK, seed=7).run()

    print("\n" + report.table())
    assert len(report.episodes) == len(ORACLE_TASKS) * EPISODES_PER_TASK
    assert {summary.task for summary in report.summaries()} == set(ORACLE_TASKS)
    lost = [(e.task, e.seed, e.outcome, e.reward) for e in report.episodes if not e.success]
    assert lost == [], report.table()
    # Every episode was a real one: the page gave the reward, and the engine took at least one step.
    assert all(episode.steps >= 1 for episode in report.episodes)
    assert all(episode.outcome == "episode_ended" for episode in report.episodes if episode.success)
    # Typing tasks needed more than one step: the engine's history and settling carried across steps.
    assert max(e.steps for e in report.episodes if e.task == "login-user") >= 3

    # Trajectories are recorded like any run: one session per episode, each step with its screenshot.
    folders = list(iter_session_folders(tmp_path / "sessions"))
    assert len(folders) == len(report.episodes)
    session = read_session(folders[0])
    assert session.header["settings"]["eval"] == "miniwob"
    assert session.steps and all((folders[0] / step["screenshot"]).is_file() for step in session.steps)
    assert session.steps[0]["decision"] == "approve"
    assert session.steps[0]["raw_text"].startswith('{"note"')


def test_a_policy_that_clicks_nowhere_scores_nothing(browser, tmp_path):
    # The bottom-right corner of the screen is outside the browser window: nothing on the page reacts.
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    backend = ScriptedBackend([corner] * 4)
    report = evaluation(browser, backend, ["click-button"], tmp_path, episodes=2, max_steps=2).run()

    assert [e.success for e in report.episodes] == [False, False]
    assert [e.outcome for e in report.episodes] == ["step_limit", "step_limit"]
    assert all(e.reward == 0 and e.steps == 2 for e in report.episodes)


def test_the_same_seed_gives_the_same_instruction(browser):
    browser.open_task("click-button")
    first = browser.start_episode(42, 10)
    browser.start_episode(43, 10)
    again = browser.start_episode(42, 10)
    browser.end_episode()
    assert first == again


def test_the_tiny_model_taught_the_right_click_wins_the_episode(browser, tmp_path):
    """The local backend on a tiny checkpoint whose weights write a chosen step: the eval clicks through it.

    The step is the oracle's answer for the episode's page (same seed, same page), so the whole path
    runs for real: tiler, vision tower, the engine's generation loop, decoding, the profile's parser, the mapping
    and XTEST, and the page's own JavaScript scores the click."""
    from bench.nemotron_tiny.chosen_answer import build_answering_checkpoint
    from holodesk.inference.local import LocalBackend

    seed = 11
    region = ScreenCapture().monitors()[0].rect
    browser.open_task("click-button")
    browser.start_episode(seed, 10)
    answer = MiniWoBOracle(browser, region).answer(region.width, region.height)
    browser.end_episode()
    backend = LocalBackend(build_answering_checkpoint(tmp_path / "checkpoint", answer), device="cpu")
    backend.load_async().result()
    try:
        # The page's own timer must not decide: a prefill of ten thousand tokens on a loaded CPU takes minutes.
        report = evaluation(
            browser, backend, ["click-button"], tmp_path, episodes=1, max_steps=1, seed=seed, time_limit_s=1800
        ).run()
    finally:
        backend.unload()

    [episode] = report.episodes
    assert (episode.success, episode.outcome, episode.steps) == (True, "episode_ended", 1), report.table()
    step = read_session(Path(episode.trajectory)).steps[0]
    assert step["raw_text"] == answer
    # The click landed where the answer's thousandths of the screenshot are on the screen (within the
    # 1000-step grid's rounding), however large the button.
    taught = json.loads(answer)["action"]
    clicked = step["action_screen"]["at"]
    expected = (region.left + taught["x"] * region.width / 1000, region.top + taught["y"] * region.height / 1000)
    assert abs(clicked[0] - expected[0]) <= 1.5 and abs(clicked[1] - expected[1]) <= 1.5, (clicked, expected)


def test_the_command_prints_the_table_and_writes_json(xvfb, tmp_path, capsys):
    answers = tmp_path / "answers.jsonl"
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    answers.write_text((json.dumps(corner) + "\n") * 4, encoding="utf-8")
    results = tmp_path / "results.json"
    code = main(
        [
            "eval", "miniwob", "--tasks", "click-button,focus-text", "--episodes", "2", "--max-steps", "1",
            "--zoom", "2", "--backend", "scripted", "--script", str(answers),
            "--json", str(results), "--sessions", str(tmp_path / "sessions"),
        ]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0
    assert "click-button" in captured.out and "focus-text" in captured.out
    assert "4/4 episodes" in captured.err  # the progress line
    written = json.loads(results.read_text())
    assert written["episodes_run"] == 4 and written["success_rate"] == 0
    assert {task["task"] for task in written["tasks"]} == {"click-button", "focus-text"}
    assert all(episode["trajectory"] for episode in written["episodes"])
    assert len(list(iter_session_folders(tmp_path / "sessions"))) == 4


def test_an_unknown_task_is_refused_before_anything_starts(xvfb, capsys):
    assert main(["eval", "miniwob", "--tasks", "click-button,no-such-task", "--backend", "remote"]) == 2
    assert "no-such-task" in capsys.readouterr().err
