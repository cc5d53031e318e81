"""The tray app under Xvfb with a model server on 127.0.0.1: the thinking status while the server takes
its time, the model's question answered on the panel, and the run going on to act on a real window."""

from __future__ import annotations

import time

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer, SlowReply
from holodesk.automation.coords import Rect
from tests.e2e.scripting import holotron, model_point
from tests.e2e.test_tray_app import (
    start_holodesk,
    stop_holodesk,
    type_task,
    wait_for_session_end,
    wait_for_window,
    wait_until_hidden,
    xdotool,
)

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack


def test_a_question_is_answered_on_the_panel_and_the_run_goes_on(xvfb, target_window, tmp_path):
    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    field = model_point(target_window.centre("field"), screen)
    with FakeOpenAIServer() as server:
        server.queue(
            SlowReply(2.5, Completion(holotron("ask_user", question="What name should I type?"))),
            Completion(holotron("write_desktop", content="Ada Lovelace", x=field.x, y=field.y)),
            Completion(holotron("answer", content="Name typed.")),
        )
        process, sessions, _ = start_holodesk(
            tmp_path, f'backend = "remote"\n\n[model.remote]\nbase_url = "{server.base_url}"'
        )
        try:
            type_task("Enter the name")  # (a task typed before the server check waits for it)

            # While the server takes its time: the thinking status, which never takes the keyboard.
            status = wait_for_window("Holodesk: thinking", timeout_s=10)
            assert xdotool("getwindowfocus").stdout.strip() != status
            time.sleep(1.2)
            assert "Holodesk: thinking" in xdotool("getwindowname", status).stdout

            panel = wait_for_window("Holodesk: a question for you", timeout_s=10)
            assert xdotool("search", "--onlyvisible", "--name", "Holodesk: thinking", check=False).stdout == ""
            # The panel took the keyboard for the reply: typing goes straight into its field.
            deadline = time.monotonic() + 5
            while xdotool("getwindowfocus").stdout.strip() != panel and time.monotonic() < deadline:
                time.sleep(0.05)
            xdotool("type", "--delay", "5", "Ada Lovelace")
            xdotool("key", "Return")

            approval = wait_for_window("Holodesk: approve", timeout_s=10)
            shell = xdotool("getwindowgeometry", "--shell", approval).stdout
            geometry = dict(line.split("=") for line in shell.split())
            xdotool("mousemove", str(int(geometry["X"]) + 8), str(int(geometry["Y"]) + 8), "click", "1")
            xdotool("key", "Return")
            wait_until_hidden(approval)
            session = wait_for_session_end(sessions, process)
        except AssertionError as exc:
            stop_holodesk(process)
            raise AssertionError(f"{exc}\nholodesk said:\n{process.stdout.read()}") from exc
        finally:
            stop_holodesk(process)
        requests = server.chat_requests
    assert session.outcome == "done", session.end
    assert [s["decision"] for s in session.steps] == ["answered", "approve", "final"]
    assert session.steps[0]["reply"] == "Ada Lovelace"
    assert session.end is not None and session.end["steps"] == 2
    assert len(requests) == 3  # the run went on after the reply
    # The model's next turn carries the reply as the question tool's output.
    later_text = "\n".join(part.get("text", "") for part in requests[1].parts())
    assert "The user replied: Ada Lovelace" in later_text
    events = target_window.sync()
    assert [e["text"] for e in events if e["event"] == "text"][-1] == "Ada Lovelace"
