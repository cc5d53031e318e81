"""`holodesk run` as a user runs it: a real process, approvals typed on stdin, a real window under Xvfb."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND


def write_script(path: Path, answers: list[str]) -> Path:
    path.write_text("".join(json.dumps(a) + "\n" for a in answers), encoding="utf-8")
    return path


def holodesk_run(script: Path, sessions: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*HOLODESK_COMMAND, "run", "Fill in the form", "--backend", "scripted", "--script", str(script),
         "--sessions", str(sessions), *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip


def form_answers(window, screen: Rect) -> list[str]:
    field = model_point(window.centre("field"), screen)
    ok = model_point(window.centre("ok"), screen)
    return [
        holotron("write_desktop", content="Ada Lovelace", x=field.x, y=field.y),
        holotron("hotkey_desktop", keys="ctrl+a"),
        holotron("click_desktop", x=ok.x, y=ok.y),
        holotron("answer", content="Form sent."),
    ]


@pytest.mark.display
def test_run_completes_a_multi_step_task_with_terminal_approval(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    script = write_script(tmp_path / "answers.jsonl", form_answers(target_window, screen))
    process = holodesk_run(script, tmp_path / "sessions")
    out, err = process.communicate("a\na\na\n", timeout=120)
    assert process.returncode == 0, out + err
    assert "done: Form sent." in out
    assert out.count("[a]pprove") == 3
    assert "picture: " in out  # the annotated screenshot's path is shown before each decision
    picture = Path(out.split("picture: ")[1].split()[0])
    assert not picture.parent.exists()  # the temporary pictures are removed when the run ends

    events = target_window.sync()
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Ada Lovelace"
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"]
    assert any(e["event"] == "key_press" and e.get("key") == "A" and "ctrl" in e.get("modifiers", []) for e in events)

    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.outcome == "done" and len(session.steps) == 4 and not session.warnings
    assert f"trajectory: {folder}" in out


@pytest.mark.display
def test_quit_at_the_prompt_executes_nothing_and_exits_3(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    script = write_script(tmp_path / "answers.jsonl", form_answers(target_window, screen))
    process = holodesk_run(script, tmp_path / "sessions")
    out, err = process.communicate("q\n", timeout=120)
    assert process.returncode == 3, out + err
    assert "stopped: " in out
    assert target_window.sync() == []


@pytest.mark.display
def test_a_run_killed_mid_task_leaves_a_readable_trajectory(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    script = write_script(tmp_path / "answers.jsonl", form_answers(target_window, screen))
    process = holodesk_run(script, tmp_path / "sessions")
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()

    def wait_for(text: str) -> None:
        while text not in lines.get(timeout=60):
            pass

    wait_for("Step 1 proposes:")
    process.stdin.write("a\n")
    process.stdin.flush()
    wait_for("Step 2 proposes:")
    process.stdin.write("a\n")
    process.stdin.flush()
    wait_for("Step 3 proposes:")  # steps 1 and 2 are done and recorded; step 3 awaits approval
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)

    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.outcome == "unfinished"
    assert [s["index"] for s in session.steps] == [1, 2]
    assert all(s["result"]["ok"] for s in session.steps)
    assert all((folder / s["screenshot"]).is_file() for s in session.steps)
    assert session.steps[0]["action_screen"]["text"] == "Ada Lovelace"


def test_bad_options_exit_2_with_a_message(tmp_path):
    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "x", "--backend", "scripted"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "pass --script" in result.stderr


@pytest.mark.display
def test_run_against_a_vllm_like_server_completes_the_task(xvfb, target_window, tmp_path):
    from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer

    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.queue(*(Completion(text=answer) for answer in form_answers(target_window, screen)))
        process = subprocess.Popen(
            [*HOLODESK_COMMAND, "run", "Fill in the form", "--backend", "remote",
             "--base-url", server.base_url, "--sessions", str(tmp_path / "sessions")],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "HOLODESK_API_KEY": "sk-test"},
        )  # fmt: skip
        out, err = process.communicate("a\na\na\n", timeout=120)
        requests = server.chat_requests
        problems = list(server.problems)
    assert process.returncode == 0, out + err
    assert problems == []  # every request was what vLLM accepts
    assert len(requests) == 4
    # Each request carries the current screenshot; later ones also the previous ones (up to 3).
    assert [len(r.image_urls()) for r in requests] == [1, 2, 3, 3]
    assert requests[0].images()[0].size == (xvfb.width, xvfb.height)
    events = target_window.sync()
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Ada Lovelace"
    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.outcome == "done"
    assert all(s["timings"]["tokens_in"] > 0 for s in session.steps)  # usage reported by the server


@pytest.mark.display
def test_run_takes_backend_script_steps_and_sessions_from_the_settings_file(xvfb, target_window, tmp_path):
    """No flags: `holodesk run` uses the settings file the tray app writes (backend, script, step limit, folder)."""
    from holodesk.app.common.settings import (
        ModelSettings,
        RunSettings,
        SessionSettings,
        Settings,
        save_settings,
        settings_path,
    )

    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    script = write_script(tmp_path / "answers.jsonl", form_answers(target_window, screen))
    config = tmp_path / "config"
    env = {**os.environ, "XDG_CONFIG_HOME": str(config), "PYTHONUNBUFFERED": "1"}
    settings = Settings(
        model=ModelSettings(backend="scripted", script=script),
        run=RunSettings(max_steps=2),
        sessions=SessionSettings(folder=tmp_path / "from-settings"),
    )
    os.environ["XDG_CONFIG_HOME"], saved = str(config), os.environ["XDG_CONFIG_HOME"]
    try:
        save_settings(settings, settings_path())
    finally:
        os.environ["XDG_CONFIG_HOME"] = saved
    assert (config / "holodesk" / "settings.toml").is_file()

    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "Fill in the form"], input="a\na\n", capture_output=True, text=True, env=env,
        timeout=120,
    )  # fmt: skip
    assert result.returncode == 5, result.stdout + result.stderr  # the settings' step limit, 2, was reached
    assert result.stdout.count("[a]pprove") == 2
    (folder,) = iter_session_folders(tmp_path / "from-settings")
    assert len(read_session(folder).steps) == 2

    # A flag overrides the file for this command only: one step, then the step limit.
    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "Fill in the form", "--max-steps", "1"], input="a\n", capture_output=True,
        text=True, env=env, timeout=120,
    )  # fmt: skip
    assert result.returncode == 5 and result.stdout.count("[a]pprove") == 1, result.stdout + result.stderr


def test_a_broken_settings_file_is_reported_and_the_flags_still_work(tmp_path):
    config = tmp_path / "config"
    (config / "holodesk").mkdir(parents=True)
    (config / "holodesk" / "settings.toml").write_text("[run]\nmax_steps = 'many'\n", encoding="utf-8")
    result = subprocess.run(
        [*HOLODESK_COMMAND, "run", "x", "--backend", "scripted"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CONFIG_HOME": str(config)},
    )
    assert result.returncode == 2
    assert "problems in the settings file" in result.stderr and "run.max_steps" in result.stderr
    assert "each of these uses its default" in result.stderr
    assert "pass --script" in result.stderr


@pytest.mark.display
def test_a_question_is_answered_in_the_terminal_and_the_run_goes_on(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    field = model_point(target_window.centre("field"), screen)
    answers = [
        holotron("ask_user", question="What name should I type?"),
        holotron("write_desktop", content="Ada Lovelace", x=field.x, y=field.y),
        holotron("answer", content="Typed the name."),
    ]
    process = holodesk_run(write_script(tmp_path / "answers.jsonl", answers), tmp_path / "sessions")
    # An empty reply is asked again; then the reply; then the typing step is approved.
    out, err = process.communicate("\nAda Lovelace\na\n", timeout=120)
    assert process.returncode == 0, out + err
    assert "the model asks you:\n  What name should I type?" in out
    assert "the reply is empty" in out
    assert "done: Typed the name." in out and "steps taken: 2" in out
    # Not a terminal: the thinking state is a plain line per step, no carriage returns.
    assert "step 1: the model is thinking" in out and "\r" not in out
    events = target_window.sync()
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Ada Lovelace"
    (folder,) = iter_session_folders(tmp_path / "sessions")
    first = read_session(folder).steps[0]
    assert (first["decision"], first["reply"]) == ("answered", "Ada Lovelace")


@pytest.mark.display
def test_quit_at_the_reply_prompt_stops_the_run(xvfb, target_window, tmp_path):
    target_window.reset()
    answers = [holotron("ask_user", question="Which file?"), holotron("answer", content="never reached")]
    process = holodesk_run(write_script(tmp_path / "answers.jsonl", answers), tmp_path / "sessions")
    out, err = process.communicate("q\n", timeout=120)
    assert process.returncode == 3, out + err
    assert "stopped: stopped by the user instead of answering" in out and "steps taken: 0" in out
