"""Ctrl+C stops the single-desktop `holodesk eval miniwob` while its model step waits on the server.

The model's answer is held back for two minutes (a slow server on 127.0.0.1); the command must end at
once with exit 3, say how many episodes it finished and close its Chromium, not wait the answer out.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer, SlowReply
from tests.support.holodesk_command import HOLODESK_COMMAND, ctrl_c_and_wait, ctrl_c_as_from_a_terminal
from tests.support.processes import children_of
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.display, pytest.mark.chromium]

STOP_WITHIN_S = 30  # the answer is held 120 s: an end within this is the stop's, not the server's


def test_ctrl_c_stops_the_single_desktop_eval_while_the_model_step_waits(xvfb, tmp_path):
    corner = '{"note": "", "thought": "", "action": {"name": "click_desktop", "x": 995, "y": 995}}'
    with FakeOpenAIServer() as server:
        server.default_reply = SlowReply(120, Completion(text=corner))
        python, *module = HOLODESK_COMMAND
        command = subprocess.Popen(
            [python, "-X", "faulthandler", *module, "eval", "miniwob", "--tasks", "click-button", "--episodes", "2",
             "--zoom", "2", "--backend", "remote", "--base-url", server.base_url,
             "--sessions", str(tmp_path / "sessions"), "--json", str(tmp_path / "results.json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "HOLODESK_API_KEY": "test-key"},
            preexec_fn=ctrl_c_as_from_a_terminal,
        )  # fmt: skip
        try:
            wait_until(lambda: len(server.chat_requests) >= 1, 120, "the first step's request")
            helpers = children_of(command.pid)  # chromedriver, and Chromium under it
            err = ctrl_c_and_wait(command, STOP_WITHIN_S)
        finally:
            if command.poll() is None:
                command.kill()
                command.wait()
    assert command.returncode == 3, err
    assert "stopped (Ctrl+C) after 0 episodes" in err
    assert '"stopped": "stopped (Ctrl+C)"' in (tmp_path / "results.json").read_text()
    wait_until(lambda: not any(os.path.exists(f"/proc/{pid}") for pid in helpers), 15, "Chromium to be closed")
