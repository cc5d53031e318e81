"""`holodesk mcp` as an agent host starts it: the SDK's own client spawns a real server over stdio, under
Xvfb, and a real window receives (or does not) what the person approves on the real approval panel."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Implementation

from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.support.holodesk_command import HOLODESK_COMMAND

PANEL_TITLE = "Holodesk: approve"
AGENT = Implementation(name="e2e-agent", version="7")


def xdotool(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=10, check=check)


def wait_for_panel(timeout_s: float = 60.0) -> tuple[str, dict[str, int]]:
    """The approval panel's window id and geometry (X, Y, WIDTH, HEIGHT), once it is shown."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = xdotool("search", "--onlyvisible", "--name", PANEL_TITLE, check=False)
        if found.returncode == 0 and found.stdout.strip():
            window = found.stdout.split()[0]
            shell = xdotool("getwindowgeometry", "--shell", window).stdout
            values = dict(line.split("=", 1) for line in shell.split() if "=" in line)
            return window, {key: int(values[key]) for key in ("X", "Y", "WIDTH", "HEIGHT")}
        time.sleep(0.1)
    raise AssertionError(f"the approval panel did not show within {timeout_s} s")


def approve_on_the_panel() -> None:
    """As a person does: click into the panel, press Enter."""
    _, geometry = wait_for_panel()
    xdotool("mousemove", str(geometry["X"] + 8), str(geometry["Y"] + 8), "click", "1")
    xdotool("key", "Return")


def approve_once_nothing_happened(window) -> None:
    """Approve, after checking that the window has seen nothing of the step yet."""
    wait_for_panel()
    assert window.sync() == [], "the window saw something before the step was approved"
    approve_on_the_panel()


class Person:
    """Plays the person on another thread; `done()` waits for them and re-raises what went wrong there."""

    def __init__(self, act: Callable[[], None]) -> None:
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, args=(act,), daemon=True)
        self.thread.start()

    def _run(self, act: Callable[[], None]) -> None:
        try:
            act()
        except BaseException as exc:
            self.errors.append(exc)

    async def done(self) -> None:
        await anyio.to_thread.run_sync(self.thread.join, 90)
        assert not self.thread.is_alive(), "the person's part did not end"
        if self.errors:
            raise self.errors[0]


def skip_on_the_panel() -> None:
    """Click the panel's Skip button: the fourth fifth of its button row (Approve takes two fifths)."""
    _, g = wait_for_panel()
    row = g["WIDTH"] - 32 - 3 * 8  # the margins and the spacing between the four buttons
    x = g["X"] + 16 + int(row * 3.5 / 5) + 2 * 8
    y = g["Y"] + g["HEIGHT"] - 14 - 12
    xdotool("mousemove", str(x), str(y), "click", "1")


def server_env() -> dict[str, str]:
    return {**os.environ, "QT_QPA_PLATFORM": "xcb", "PYTHONUNBUFFERED": "1"}


def stdio_server(sessions: Path, command: list[str] | None = None) -> StdioServerParameters:
    argv = command or [*HOLODESK_COMMAND, "mcp"]
    return StdioServerParameters(command=argv[0], args=[*argv[1:], "--sessions", str(sessions)], env=server_env())


def server_with_scripted_model(tmp_path: Path, answers: list[str], sessions: Path) -> StdioServerParameters:
    """`holodesk mcp` whose settings' model is the scripted backend, answering `answers` in turn."""
    script = tmp_path / "answers.jsonl"
    script.write_text("".join(json.dumps(answer) + "\n" for answer in answers), encoding="utf-8")
    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True)
    (config / "settings.toml").write_text(f'[model]\nbackend = "scripted"\nscript = "{script}"\n', encoding="utf-8")
    return StdioServerParameters(
        command=HOLODESK_COMMAND[0],
        args=[*HOLODESK_COMMAND[1:], "mcp", "--sessions", str(sessions)],
        env={**server_env(), "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )


def raw_host_click(x: int, y: int) -> str:
    """What a host with no SDK writes to start a session and ask for one click: the MCP handshake, then the call."""
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw-host", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "act", "arguments": {"action": "click", "x": x, "y": y}}},
    ]  # fmt: skip
    return "".join(json.dumps(message) + "\n" for message in messages)


def call_with_person(server: object, tool: str, arguments: dict, person: Callable[[], None] | None) -> object:
    """Call `tool` on a server the SDK's client starts (or reaches), while `person` answers the panel."""
    answered: list[BaseException] = []

    def act_as_person() -> None:
        try:
            if person is not None:
                person()
        except BaseException as exc:  # re-raised in the test's thread
            answered.append(exc)

    async def go() -> CallToolResult | MCPError:
        async with Client(server, client_info=AGENT, read_timeout_seconds=120) as client:
            helper = threading.Thread(target=act_as_person, daemon=True)
            helper.start()
            try:
                return await client.call_tool(tool, arguments)
            except MCPError as exc:
                return exc
            finally:
                await anyio.to_thread.run_sync(helper.join, 60)

    result = anyio.run(go)
    if answered:
        raise answered[0]
    return result


@pytest.mark.display
def test_act_clicks_the_window_only_after_the_person_approves(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = target_window.centre("ok")  # the monitor starts at 0,0: screen and screenshot pixels agree

    def person() -> None:
        wait_for_panel()
        assert target_window.sync() == [], "the window saw something before the step was approved"
        approve_on_the_panel()

    result = call_with_person(
        stdio_server(tmp_path / "sessions"),
        "act",
        {"action": "click", "x": ok.x, "y": ok.y, "reason": "send it"},
        person,
    )
    assert isinstance(result, CallToolResult) and not result.is_error, result
    assert result.content[0].text.startswith("done: click at")
    events = target_window.sync()
    assert [e["widget"] for e in events if e["event"] == "clicked"] == ["ok"]

    (folder,) = iter_session_folders(tmp_path / "sessions")
    session = read_session(folder)
    assert session.task.startswith("e2e-agent 7 via MCP: click at")
    assert session.steps[0]["decision"] == "approve" and session.steps[0]["result"]["ok"]
    listed = subprocess.run(
        [*HOLODESK_COMMAND, "history", "--sessions", str(tmp_path / "sessions")],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert "e2e-agent 7 via MCP" in listed.stdout and folder.name in listed.stdout


@pytest.mark.display
def test_a_skipped_step_is_a_tool_error_and_the_window_saw_nothing(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = target_window.centre("ok")
    result = call_with_person(
        stdio_server(tmp_path / "sessions"), "act", {"action": "click", "x": ok.x, "y": ok.y}, skip_on_the_panel
    )
    assert isinstance(result, CallToolResult) and result.is_error
    assert result.content[0].text.startswith("the person skipped this step: nothing was done"), result.content
    assert target_window.sync() == []


@pytest.mark.display
def test_bad_input_is_an_mcp_error_in_words_and_no_panel_shows(xvfb, target_window, tmp_path):
    target_window.reset()
    result = call_with_person(
        stdio_server(tmp_path / "sessions"), "act", {"action": "click", "x": 99_999, "y": 10}, None
    )
    assert isinstance(result, MCPError)
    assert "x=99999, y=10 is off the screen" in result.error.message and "nothing was done" in result.error.message
    assert xdotool("search", "--onlyvisible", "--name", PANEL_TITLE, check=False).stdout.strip() == ""
    assert target_window.sync() == []
    assert list(iter_session_folders(tmp_path / "sessions")) == []


@pytest.mark.display
def test_the_printed_claude_desktop_config_starts_the_server_as_written(xvfb, tmp_path):
    printed = subprocess.run(
        [*HOLODESK_COMMAND, "mcp", "--print-config", "claude-desktop"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    entry = json.loads(printed.stdout)["mcpServers"]["holodesk"]
    assert "Claude Desktop" in printed.stderr  # where it goes, said apart from the snippet

    async def go() -> list[str]:
        server = StdioServerParameters(command=entry["command"], args=entry["args"], env=server_env())
        async with Client(server, client_info=AGENT) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    assert set(anyio.run(go)) >= {"screenshot", "act", "list_routines"}


def wait_for_session_end(sessions: Path, timeout_s: float = 30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        folders = list(iter_session_folders(sessions))
        if folders and read_session(folders[-1]).end is not None:
            return read_session(folders[-1])
        time.sleep(0.1)
    raise AssertionError("the step's session did not end")


def panel_hidden(timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not xdotool("search", "--onlyvisible", "--name", PANEL_TITLE, check=False).stdout.strip():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.display
def test_a_cancel_from_the_client_withdraws_the_step_and_records_the_stop(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = target_window.centre("ok")
    sessions = tmp_path / "sessions"
    seen: dict[str, object] = {}

    async def go() -> CallToolResult:
        async with Client(stdio_server(sessions), client_info=AGENT, read_timeout_seconds=120) as client:
            async with anyio.create_task_group() as tasks:
                scope = anyio.CancelScope()

                async def calling() -> None:
                    with scope:
                        await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
                        seen["answered"] = True  # never: the call was cancelled

                tasks.start_soon(calling)
                await anyio.to_thread.run_sync(wait_for_panel)
                scope.cancel()  # the SDK sends notifications/cancelled for the call
            seen["session"] = await anyio.to_thread.run_sync(wait_for_session_end, sessions)
            seen["hidden"] = await anyio.to_thread.run_sync(panel_hidden)
            # The server is free again: the next step is shown and, approved, runs.
            person = Person(lambda: approve_once_nothing_happened(target_window))
            result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
            await person.done()
            return result

    result = anyio.run(go)
    session = seen["session"]
    assert "answered" not in seen and seen["hidden"], "the cancelled step's panel stayed up"
    assert session.outcome == "stopped", session.end
    assert session.end["detail"].startswith("stopped: the MCP client cancelled the step"), session.end
    assert not result.is_error, result.content
    clicks = [e["widget"] for e in target_window.sync() if e["event"] == "clicked"]
    assert clicks == ["ok"]  # the approved second step only; the cancelled one did nothing


@pytest.mark.display
def test_an_act_at_another_holodesk_panels_approve_button_is_refused_and_nothing_is_approved(
    xvfb, target_window, tmp_path
):
    target_window.reset()
    ok = target_window.centre("ok")
    seen: dict[str, object] = {}

    async def go() -> None:
        async with (
            Client(stdio_server(tmp_path / "first"), client_info=AGENT, read_timeout_seconds=120) as first,
            Client(stdio_server(tmp_path / "second"), client_info=AGENT, read_timeout_seconds=120) as second,
        ):
            async with anyio.create_task_group() as tasks:
                scope = anyio.CancelScope()

                async def waiting() -> None:
                    with scope:
                        await first.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
                        seen["approved"] = True  # never: the step is withdrawn below

                tasks.start_soon(waiting)
                _, panel = await anyio.to_thread.run_sync(wait_for_panel)
                approve = (panel["X"] + 30, panel["Y"] + panel["HEIGHT"] - 14 - 12)  # on its Approve button
                seen["refused"] = await second.call_tool("act", {"action": "click", "x": approve[0], "y": approve[1]})
                seen["still asking"] = bool(
                    xdotool("search", "--onlyvisible", "--name", PANEL_TITLE, check=False).stdout.strip()
                )
                scope.cancel()
            seen["first"] = await anyio.to_thread.run_sync(wait_for_session_end, tmp_path / "first")

    anyio.run(go)
    refused = seen["refused"]
    assert isinstance(refused, CallToolResult) and refused.is_error
    assert "is on Holodesk's own window 'Holodesk: approve this step?'" in refused.content[0].text
    assert "nothing was done" in refused.content[0].text
    assert seen["still asking"] and "approved" not in seen
    assert seen["first"].outcome == "stopped"
    assert list(iter_session_folders(tmp_path / "second")) == []  # never shown, never recorded
    assert target_window.sync() == []


@pytest.mark.display
def test_a_cancel_while_typing_stops_it_part_way_with_no_key_held(xvfb, target_window, tmp_path):
    from tests.support.x11_probe import pressed_keycodes

    target_window.reset()
    field = target_window.centre("field")
    text = "the quick brown fox jumps over the lazy dog " * 40
    sessions = tmp_path / "sessions"
    seen: dict[str, object] = {}

    async def go() -> None:
        async with Client(stdio_server(sessions), client_info=AGENT, read_timeout_seconds=120) as client:
            async with anyio.create_task_group() as tasks:
                scope = anyio.CancelScope()

                async def typing() -> None:
                    with scope:
                        await client.call_tool("act", {"action": "type", "text": text, "x": field.x, "y": field.y})
                        seen["finished"] = True

                tasks.start_soon(typing)
                await anyio.to_thread.run_sync(approve_on_the_panel)
                # Once the field has some of the text, the agent cancels its call.
                await anyio.to_thread.run_sync(
                    lambda: target_window.wait_for(lambda e: e["event"] == "text" and len(e["text"]) >= 20, 60)
                )
                scope.cancel()
            seen["session"] = await anyio.to_thread.run_sync(wait_for_session_end, sessions)

    anyio.run(go)
    session = seen["session"]
    assert "finished" not in seen
    assert session.outcome == "stopped", session.end
    assert session.end["detail"].startswith("stopped: the MCP client cancelled the step")
    typed = [e["text"] for e in target_window.sync() if e["event"] == "text"]
    assert typed and 0 < len(typed[-1]) < len(text), "the typing was not stopped part-way"
    assert pressed_keycodes() == []


@pytest.mark.display
def test_an_acts_session_saved_as_a_routine_replays_through_run_routine_after_approval(xvfb, target_window, tmp_path):
    target_window.reset()
    ok = target_window.centre("ok")
    sessions, routines = tmp_path / "sessions", tmp_path / "routines"
    server = StdioServerParameters(
        command=HOLODESK_COMMAND[0],
        args=[*HOLODESK_COMMAND[1:], "mcp", "--sessions", str(sessions), "--routines", str(routines)],
        env=server_env(),
    )
    seen: dict[str, object] = {}

    async def go() -> None:
        async with Client(server, client_info=AGENT, read_timeout_seconds=120) as client:
            person = Person(lambda: approve_once_nothing_happened(target_window))
            seen["act"] = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
            await person.done()
            (folder,) = iter_session_folders(sessions)
            saved = await anyio.to_thread.run_sync(
                lambda: subprocess.run(
                    [
                        *HOLODESK_COMMAND,
                        "routine",
                        "save",
                        folder.name,
                        "press-ok",
                        "--sessions",
                        str(sessions),
                        "--routines",
                        str(routines),
                    ],
                    input="",
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
            )
            assert saved.returncode == 0, saved.stdout + saved.stderr
            seen["listed"] = await client.call_tool("list_routines", {})
            seen["clicks before"] = await anyio.to_thread.run_sync(target_window.sync)
            person = Person(lambda: approve_once_nothing_happened(target_window))
            seen["replay"] = await client.call_tool("run_routine", {"name": "press-ok"})
            await person.done()

    anyio.run(go)
    assert not seen["act"].is_error
    assert "press-ok" in seen["listed"].content[0].text
    replay = seen["replay"]
    assert not replay.is_error, replay.content
    assert replay.content[0].text.startswith("the routine 'press-ok' ran: 1 steps taken")
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]
    replayed = read_session(sorted(iter_session_folders(sessions))[-1])
    assert replayed.task.startswith("e2e-agent 7 via MCP: routine 'press-ok'")
    assert replayed.steps[0]["decision"] == "approve"


@pytest.mark.display
def test_run_task_streams_progress_and_ends_in_a_recorded_session(xvfb, target_window, tmp_path):
    from holodesk.automation.coords import Rect
    from tests.e2e.scripting import holotron, model_point

    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    ok = model_point(target_window.centre("ok"), screen)
    answers = [holotron("click_desktop", x=ok.x, y=ok.y), holotron("answer", content="Pressed OK.")]
    sessions = tmp_path / "sessions"
    server = server_with_scripted_model(tmp_path, answers, sessions)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    async def go() -> CallToolResult:
        async with Client(server, client_info=AGENT, read_timeout_seconds=120) as client:
            person = Person(lambda: approve_once_nothing_happened(target_window))
            result = await client.call_tool("run_task", {"task": "Press OK"}, progress_callback=on_progress)
            await person.done()
            return result

    result = anyio.run(go)
    assert not result.is_error, result.content
    assert result.content[0].text.startswith("done: Pressed OK.; 1 steps taken")
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]
    waiting = [m for m in messages if m.startswith("step 1: waiting for the person's approval: click at")]
    assert waiting and any(m.startswith("finished, done: Pressed OK.") for m in messages), messages
    assert messages.index(waiting[0]) < messages.index(next(m for m in messages if m.startswith("step 1: approved")))
    (folder,) = iter_session_folders(sessions)
    session = read_session(folder)
    assert session.task == "e2e-agent 7 via MCP: Press OK" and session.outcome == "done"
    assert session.header["settings"]["mcp_client"] == "e2e-agent 7"


@pytest.mark.display
def test_locate_answers_with_the_models_point_and_nothing_is_shown_or_done(xvfb, target_window, tmp_path):
    from holodesk.automation.coords import Rect
    from tests.e2e.scripting import model_point

    target_window.reset()
    screen = Rect(0, 0, xvfb.width, xvfb.height)
    centre = target_window.centre("ok")
    ok = model_point(centre, screen)
    sessions = tmp_path / "sessions"
    server = server_with_scripted_model(tmp_path, [json.dumps({"x": ok.x, "y": ok.y})], sessions)
    result = call_with_person(server, "locate", {"description": "the OK button"}, None)
    assert isinstance(result, CallToolResult) and not result.is_error, result
    found = result.structured_content
    assert found is not None and (found["width"], found["height"]) == (xvfb.width, xvfb.height)
    # The model's 0-1000 grid is coarser than the screen's pixels: back within one grid step.
    assert abs(found["x"] - centre.x) <= xvfb.width / 1000 + 1 and abs(found["y"] - centre.y) <= xvfb.height / 1000 + 1
    assert xdotool("search", "--onlyvisible", "--name", PANEL_TITLE, check=False).stdout.strip() == ""
    assert target_window.sync() == [] and list(iter_session_folders(sessions)) == []


@pytest.mark.display
def test_a_client_that_disconnects_mid_step_stops_it(xvfb, target_window, tmp_path):
    """A host that goes away (stdin closed) without a cancel: the waiting step is stopped and recorded."""
    target_window.reset()
    ok = target_window.centre("ok")
    sessions = tmp_path / "sessions"
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "mcp", "--sessions", str(sessions)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(),
    )  # fmt: skip
    try:
        assert process.stdin is not None
        process.stdin.write(raw_host_click(ok.x, ok.y))
        process.stdin.flush()
        wait_for_panel()
        process.stdin.close()  # the host is gone
        assert process.wait(30) == 0, process.stderr.read() if process.stderr else ""
    finally:
        if process.poll() is None:
            process.kill()
    session = wait_for_session_end(sessions)
    assert session.outcome == "stopped", session.end
    assert session.task.startswith("raw-host 1 via MCP: click at")
    assert panel_hidden() and target_window.sync() == []


@pytest.mark.display
def test_typing_that_presses_enter_is_asked_even_where_the_person_auto_approves_typing(xvfb, target_window, tmp_path):
    """The person's own "approve typing without asking" setting holds for MCP steps as in the app: it never
    covers typing that presses Enter."""
    target_window.reset()
    field = target_window.centre("field")
    config = tmp_path / "config" / "holodesk"
    config.mkdir(parents=True)
    (config / "settings.toml").write_text('[approval]\nauto_approve = ["type"]\n', encoding="utf-8")
    server = StdioServerParameters(
        command=HOLODESK_COMMAND[0],
        args=[*HOLODESK_COMMAND[1:], "mcp", "--sessions", str(tmp_path / "sessions")],
        env={**server_env(), "XDG_CONFIG_HOME": str(tmp_path / "config")},
    )
    typed = {"action": "type", "text": "plain", "x": field.x, "y": field.y}

    async def go() -> tuple[CallToolResult, CallToolResult]:
        async with Client(server, client_info=AGENT, read_timeout_seconds=120) as client:
            plain = await client.call_tool("act", typed)  # covered by the setting: no panel, typed
            person = Person(skip_on_the_panel)  # with Enter: shown, and the person skips it
            entered = await client.call_tool("act", {**typed, "text": "enter", "press_enter": True})
            await person.done()
            return plain, entered

    plain, entered = anyio.run(go)
    assert not plain.is_error, plain.content
    assert entered.is_error and entered.content[0].text.startswith("the person skipped this step")
    texts = [e["text"] for e in target_window.sync() if e["event"] == "text"]
    assert texts and texts[-1] == "plain"  # the Enter step typed nothing
