"""`holodesk mcp` while the tray app runs: the agent's steps go to the tray, shown on its one approval panel.

The real tray app runs under Xvfb with the scripted model; the SDK's own client spawns `holodesk mcp` over
stdio with no DISPLAY at all, so the server can only work by handing its stream to the tray (alone it
would refuse: "no display"). The real window reports what the person approved; the session is in the
tray's sessions folder with the client's name.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult

from holodesk.automation.actions import Point
from holodesk.automation.coords import Rect
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.app.setup.test_first_start_tray import Tray
from tests.e2e.scripting import holotron, model_point
from tests.e2e.test_first_hour_tray import shot
from tests.e2e.test_mcp_stdio import (
    AGENT,
    Person,
    approve_once_nothing_happened,
    panel_hidden,
    raw_host_click,
    skip_on_the_panel,
    wait_for_panel,
    wait_for_session_end,
)
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = pytest.mark.display


def clicks(window) -> list[str]:  # type: ignore[no-untyped-def]
    return [e["widget"] for e in window.sync() if e["event"] == "clicked"]


TRAY_READY_S = 120.0


class TrayDesk:
    """The tray app's environment (its socket, settings, sessions folder) and the process itself."""

    def __init__(self, tmp_path: Path, answers: list[str]) -> None:
        self.sessions = tmp_path / "tray-sessions"
        script = tmp_path / "answers.jsonl"
        script.write_text("".join(json.dumps(answer) + "\n" for answer in answers), encoding="utf-8")
        config = tmp_path / "config" / "holodesk"
        config.mkdir(parents=True)
        (config / "settings.toml").write_text(
            f'[model]\nbackend = "scripted"\nscript = "{script}"\n\n[sessions]\nfolder = "{self.sessions}"\n',
            encoding="utf-8",
        )
        runtime = tmp_path / "runtime"
        runtime.mkdir(mode=0o700)
        self.socket = tmp_path / "tray.sock"
        self.env = {
            **os.environ,
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_RUNTIME_DIR": str(runtime),
            "HOLODESK_INSTANCE_NAME": str(self.socket),
            "QT_QPA_PLATFORM": "xcb",
            "PYTHONUNBUFFERED": "1",
        }
        self.tray = Tray(self.env)
        self.tray.wait_until(
            lambda: self.socket.exists() and "Holodesk is running" in self.tray.output,
            "the tray listened on its socket",
            TRAY_READY_S,
        )

    def mcp_server(self) -> StdioServerParameters:
        """`holodesk mcp` as a host starts it, here with no display: it can only hand its steps to the tray."""
        env = {k: v for k, v in self.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
        return StdioServerParameters(command=HOLODESK_COMMAND[0], args=[*HOLODESK_COMMAND[1:], "mcp"], env=env)

    @contextlib.contextmanager
    def raw_host_at_the_panel(self, point: Point) -> Iterator[tuple[subprocess.Popen[str], TextIO]]:
        """`holodesk mcp` started by a host with no SDK, its one click at `point` waiting on the tray's panel:
        the process and its stdin (the host's end); killed at the end if it is still running."""
        server = self.mcp_server()
        process = subprocess.Popen(
            [server.command, *server.args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server.env,
        )  # fmt: skip
        try:
            assert process.stdin is not None
            process.stdin.write(raw_host_click(point.x, point.y))
            process.stdin.flush()
            wait_for_panel()
            yield process, process.stdin
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)

    def trigger(self, *command: str) -> None:
        subprocess.run([*HOLODESK_COMMAND, "trigger", *command], env=self.env, check=True, timeout=60)


@pytest.fixture
def tray_desk(xvfb, tmp_path) -> Iterator[TrayDesk]:  # type: ignore[no-untyped-def]
    desk = TrayDesk(tmp_path, [holotron("answer", content="A task of the tray's own would end here.")])
    yield desk
    desk.tray.stop()


def test_an_act_is_approved_on_the_trays_panel_and_recorded_in_its_sessions(tray_desk, target_window):
    target_window.reset()
    ok = target_window.centre("ok")

    def person() -> None:
        wait_for_panel()
        if os.environ.get("HOLODESK_TEST_SHOTS"):
            time.sleep(1.0)  # a picture for a person: the panel mapped is painted a moment later
        shot(tray_desk.env, "mcp-step-on-the-trays-panel")
        approve_once_nothing_happened(target_window)

    async def go() -> CallToolResult:
        async with Client(tray_desk.mcp_server(), client_info=AGENT, read_timeout_seconds=120) as client:
            person_done = Person(person)
            result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y, "reason": "send it"})
            await person_done.done()
            return result

    result = anyio.run(go)
    assert not result.is_error, result.content
    assert result.content[0].text.startswith("done: click at")
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]
    (folder,) = iter_session_folders(tray_desk.sessions)
    session = read_session(folder)
    assert session.task.startswith("e2e-agent 7 via MCP: click at") and session.outcome == "done"
    assert "An agent is connected" in tray_desk.tray.output  # the person is told where the steps come from


def test_the_trays_own_task_waits_its_turn_and_the_trays_stop_stops_the_agents_step(tray_desk, target_window):
    target_window.reset()
    ok = target_window.centre("ok")
    seen: dict[str, object] = {}

    def person() -> None:
        wait_for_panel()
        tray = tray_desk.tray
        tray_desk.trigger()  # the person opens the tray's prompt and asks for a task of their own
        tray.wait_until(lambda: tray.windows("Holodesk: new task"), "the tray's prompt opened")
        (prompt,) = tray.windows("Holodesk: new task")
        tray.keys(prompt, "ctrl+a")
        tray.type("something of my own")
        tray.keys(prompt, "Return")
        tray.wait_until(
            lambda: "was not started: an MCP client's step is running" in tray.output,
            "the tray said why its own task did not start",
        )
        # The Enter's release may reach the window that gets the focus after the prompt: no click, though.
        assert not clicks(target_window), "the window was clicked by a step nobody approved"
        tray_desk.trigger("stop")  # the tray's Stop, as the menu's or the hotkey's

    async def go() -> CallToolResult:
        async with Client(tray_desk.mcp_server(), client_info=AGENT, read_timeout_seconds=120) as client:
            helper = Person(person)
            result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
            await helper.done()
            seen["hidden"] = await anyio.to_thread.run_sync(panel_hidden)
            return result

    result = anyio.run(go)
    assert result.is_error and "stopped" in result.content[0].text, result.content
    assert seen["hidden"] and not clicks(target_window)
    session = wait_for_session_end(tray_desk.sessions)
    assert session.outcome == "stopped", session.end
    assert "Stop in the Holodesk tray" in session.end["detail"], session.end


def test_a_host_that_goes_away_mid_step_stops_it_in_the_tray(tray_desk, target_window):
    target_window.reset()
    ok = target_window.centre("ok")
    with tray_desk.raw_host_at_the_panel(ok) as (process, host_stdin):
        host_stdin.close()  # the host is gone
        assert process.wait(30) == 0
    assert process.stderr is not None
    assert "the Holodesk tray app is running on this display: every step goes to it" in process.stderr.read()
    session = wait_for_session_end(tray_desk.sessions)
    assert session.outcome == "stopped", session.end
    assert session.task.startswith("raw-host 1 via MCP: click at")
    assert panel_hidden() and target_window.sync() == []


def test_run_task_uses_the_trays_model_and_panel(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = model_point(target_window.centre("ok"), Rect(0, 0, xvfb.width, xvfb.height))
    desk = TrayDesk(tmp_path, [holotron("click_desktop", x=ok.x, y=ok.y), holotron("answer", content="Pressed OK.")])
    try:

        async def go() -> CallToolResult:
            async with Client(desk.mcp_server(), client_info=AGENT, read_timeout_seconds=120) as client:
                person = Person(lambda: approve_once_nothing_happened(target_window))
                result = await client.call_tool("run_task", {"task": "Press OK"})
                await person.done()
                return result

        result = anyio.run(go)
    finally:
        desk.tray.stop()
    assert not result.is_error, result.content
    assert result.content[0].text.startswith("done: Pressed OK.; 1 steps taken")
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]
    (folder,) = iter_session_folders(desk.sessions)
    assert read_session(folder).task == "e2e-agent 7 via MCP: Press OK"


def test_a_skip_on_the_trays_panel_is_a_tool_error_and_nothing_happens(tray_desk, target_window):
    target_window.reset()
    ok = target_window.centre("ok")

    async def go() -> CallToolResult:
        async with Client(tray_desk.mcp_server(), client_info=AGENT, read_timeout_seconds=120) as client:
            person = Person(skip_on_the_panel)
            result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
            await person.done()
            return result

    started = time.monotonic()
    result = anyio.run(go)
    assert result.is_error and "skipped" in result.content[0].text, result.content
    assert target_window.sync() == [] and time.monotonic() - started < 120


def test_a_tray_that_ends_mid_session_ends_holodesk_mcp_in_words(tray_desk, target_window):
    """The host's server must not hang on a tray that is gone: it says so and exits 1, and nothing was done."""
    target_window.reset()
    ok = target_window.centre("ok")
    with tray_desk.raw_host_at_the_panel(ok) as (process, _):
        tray_desk.tray.stop()  # the tray app ends (SIGTERM) while the step waits on its panel
        assert process.wait(30) == 1
    assert process.stderr is not None
    said = process.stderr.read()
    assert "holodesk mcp: the Holodesk tray app ended this MCP session" in said, said
    assert not clicks(target_window)
