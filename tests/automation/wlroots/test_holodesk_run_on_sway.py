"""`holodesk run` on the headless sway, against the loopback model server: it picks the wlroots backend
from the session's environment alone, clicks a native Wayland Qt field and types into it (issue 45's
"done when" for sway).

The command gets sway's client environment (WAYLAND_DISPLAY, SWAYSOCK, XDG_CURRENT_DESKTOP=sway, no
DISPLAY, no HOLODESK_BACKEND), so nothing but the backend choice can lead it to grim and wtype. The
model's screenshots are checked to be the sway output's size and to show the Qt window's colour, so
they came from grim. The click is proposed at the field's centre (in the model's 0-1000 space): the
window must log the press and release on the field within a pixel of that centre (one model unit is
1.024 pixels here), through the run's virtual pointer. The typed text is read back from the Qt field
(its `enter` event carries the field's whole content).

The same sway described as an unknown compositor (no SWAYSOCK, XDG_CURRENT_DESKTOP=mystery), with the
real xdg-desktop-portal in a D-Bus session of the command's own (dbus-run-session), takes the portal
path; Debian 12's portal answers there through its GNOME backend, which then refuses: the run must
end in words before anything is typed.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer
from bench.rigs.sway_stack import OUTPUT_SIZE, SwayStack
from holodesk.automation.actions import Point
from holodesk.automation.backends import WLROOTS_NOTICE, unknown_desktop_notice
from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.automation.wlroots.conftest import SwayTarget
from tests.e2e.scripting import holotron, model_point
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.wayland_target import BACKGROUND_COLOUR

pytestmark = [pytest.mark.display, pytest.mark.wlroots]

TYPED = "Ada Lovelace, née Byron"


def run_env(stack: SwayStack, tmp_path: Path) -> dict[str, str]:
    env = stack.env()
    env.pop("HOLODESK_BACKEND", None)  # the session alone decides
    env.update(
        HOLODESK_API_KEY="sk-test",
        PYTHONUNBUFFERED="1",
        PYTHONPATH=os.environ.get("PYTHONPATH", ""),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # no settings file of the developer's
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    return env


def test_holodesk_run_clicks_and_types_on_sway(sway_stack: SwayStack, sway_target: SwayTarget, tmp_path: Path) -> None:
    sway_target.clear()
    before = len(sway_target.seen)
    screen = Rect(0, 0, *OUTPUT_SIZE)
    x, y, width, height = sway_target.ready["layout"]["field"]
    centre = Point(x + width // 2, y + height // 2)
    field = model_point(centre, screen)
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.queue(
            Completion(text=holotron("click_desktop", x=field.x, y=field.y)),
            Completion(text=holotron("write_desktop", content=TYPED, press_enter=True)),
            Completion(text=holotron("answer", content="Typed it.")),
        )
        done = subprocess.run(
            [*HOLODESK_COMMAND, "run", "Type the name", "--backend", "remote", "--base-url", server.base_url,
             "--sessions", str(tmp_path / "sessions")],
            input="a\na\na\n", capture_output=True, text=True, env=run_env(sway_stack, tmp_path), timeout=180,
        )  # fmt: skip
        requests = server.chat_requests
        problems = list(server.problems)
    out, err = done.stdout, done.stderr
    assert problems == [], problems
    assert WLROOTS_NOTICE in out + err, out + err  # the wlroots backend was built, and said so
    assert done.returncode == 0, out + err

    # The click reached the native Wayland field, where the model pointed.
    press = sway_target.wait_for("press", 30.0)
    release = sway_target.wait_for("release", 10.0)
    for event in (press, release):
        assert event["button"] == "LeftButton" and event["widget"] == "field", (event, out + err)
        assert abs(event["x"] - centre.x) <= 1 and abs(event["y"] - centre.y) <= 1, (event, centre)

    # The typing reached the same field, exactly.
    assert sway_target.wait_for("enter", 30.0)["text"] == TYPED, out + err
    assert [e["event"] for e in sway_target.seen[before:] if e["event"] in ("press", "release", "enter")] == [
        "press", "release", "enter",
    ]  # fmt: skip

    # Every screenshot the model saw is sway's output, through grim: its size and the window's colour.
    assert requests, out + err
    first = np.asarray(requests[0].images()[0].convert("RGB"))
    assert (first.shape[1], first.shape[0]) == OUTPUT_SIZE
    assert (first == BACKGROUND_COLOUR).all(axis=2).mean() > 0.3, "the screenshot does not show the Qt window"

    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.outcome == "done", session.outcome
    click, typed, _answer = session.steps
    assert click["result"]["ok"] and typed["result"]["ok"], session.steps
    assert typed["image_size"] == list(OUTPUT_SIZE)


def test_holodesk_run_on_an_unknown_compositor_is_refused_in_words(
    sway_stack: SwayStack, sway_target: SwayTarget, tmp_path: Path
) -> None:
    sway_target.clear()
    before = len(sway_target.seen)
    env = run_env(sway_stack, tmp_path)
    env.pop("SWAYSOCK")
    env["XDG_CURRENT_DESKTOP"] = "mystery"
    with FakeOpenAIServer(api_key="sk-test") as server:
        server.queue(Completion(text=holotron("write_desktop", content="never typed", press_enter=True)))
        done = subprocess.run(
            ["dbus-run-session", "--", *HOLODESK_COMMAND, "run", "Type", "--backend", "remote", "--base-url",
             server.base_url, "--sessions", str(tmp_path / "sessions")],
            input="a\n", capture_output=True, text=True, env=env, timeout=180,
        )  # fmt: skip
    out, err = done.stdout, done.stderr
    assert done.returncode != 0, out + err
    assert unknown_desktop_notice("mystery") in err, err  # before the portal is asked
    assert "error: the desktop portal could not share the screen" in err, err
    assert "[a]pprove" not in out, out  # nothing was proposed to the user
    sway_target.clear()
    assert [e for e in sway_target.seen[before:] if e.get("event") in ("key", "text", "enter")] == []
