"""A real `holodesk run` killed outright (kill -9) in the middle of a drag on sway: the next start releases the button.

The run gets sway's client environment and the loopback model server, whose one answer is a long
drag across the native Wayland Qt window (from its pad to the far corner: about 90 steps of 12 px,
close to a second). Once the window logs the drag's press, the run is stopped (SIGSTOP, so the drag
cannot go on while the test looks) and then killed with SIGKILL; the window must have seen no release
by then, or the test could not kill it mid-drag and says so. sway keeps the button down (its device
died with the run). The next start, `holodesk doctor` in the same session, must release it: the
window logs the release, doctor reports it, and no held-input marker is left in the runtime folder.
"""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer
from bench.rigs.sway_stack import OUTPUT_SIZE, SwayStack
from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.held_input import MARKER_PREFIX
from tests.automation.wlroots.conftest import SwayTarget
from tests.automation.wlroots.test_holodesk_run_on_sway import run_env
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = [pytest.mark.display, pytest.mark.wlroots]


def test_a_run_killed_mid_drag_leaves_no_button_down_after_the_next_start(
    sway_stack: SwayStack, sway_target: SwayTarget, tmp_path: Path
) -> None:
    screen = Rect(0, 0, *OUTPUT_SIZE)
    left, top, _, _ = sway_target.ready["layout"]["pad"]
    start, end = Point(left + 20, top + 20), Point(OUTPUT_SIZE[0] - 20, OUTPUT_SIZE[1] - 20)
    model_start, model_end = model_point(start, screen), model_point(end, screen)
    env = run_env(sway_stack, tmp_path)
    before = len(sway_target.seen)
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.queue(
            Completion(
                text=holotron(
                    "drag_to_desktop", start_x=model_start.x, start_y=model_start.y, x=model_end.x, y=model_end.y
                )
            )
        )
        log = (tmp_path / "run.log").open("w")
        run = subprocess.Popen(
            [*HOLODESK_COMMAND, "run", "Drag the pad away", "--backend", "remote", "--base-url", server.base_url,
             "--sessions", str(tmp_path / "sessions")],
            stdin=subprocess.PIPE, stdout=log, stderr=subprocess.STDOUT, text=True, env=env,
        )  # fmt: skip
        try:
            assert run.stdin is not None
            run.stdin.write("a\n")  # approve the drag
            run.stdin.flush()
            press = sway_target.wait_for("press", 60.0)
            run.send_signal(signal.SIGSTOP)
            seen = [e["event"] for e in sway_target.seen[before:]]
            assert "release" not in seen and "drag" not in seen, f"the drag ended before it could be killed: {seen}"
            run.kill()
            run.wait(10)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait(10)
            log.close()
    assert press["button"] == "LeftButton" and press["widget"] == "pad", press
    assert run.returncode == -signal.SIGKILL
    markers = list(sway_stack.client_runtime_dir.rglob(f"{MARKER_PREFIX}*"))
    assert len(markers) == 1, (markers, (tmp_path / "run.log").read_text())  # the killed run named its button

    doctor = subprocess.run(
        [*HOLODESK_COMMAND, "doctor", "--backend", "remote", "--base-url", "http://127.0.0.1:9/v1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    release = sway_target.wait_for("release", 10.0)
    assert release["button"] == "LeftButton", release
    report = doctor.stdout + doctor.stderr
    held = [text for text in report.splitlines() if "held input" in text]
    assert held and "mouse button 1" in held[0], report
    assert not list(sway_stack.client_runtime_dir.rglob(f"{MARKER_PREFIX}*")), report
