"""`holodesk mcp --http`: a real server on 127.0.0.1 under Xvfb; the SDK's client with the printed token acts
(after the person approves on the real panel); a request without the token, or with another, is refused."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import queue
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from holodesk.app.mcp.http_auth import NO_TOKEN, WRONG_TOKEN
from tests.e2e.test_mcp_stdio import (
    AGENT,
    Person,
    approve_once_nothing_happened,
    panel_hidden,
    server_env,
    wait_for_panel,
    wait_for_session_end,
)
from tests.support.holodesk_command import HOLODESK_COMMAND


@pytest.fixture
def http_server(xvfb, tmp_path) -> Iterator[dict[str, str]]:
    process = subprocess.Popen(
        [*HOLODESK_COMMAND, "mcp", "--http", "--sessions", str(tmp_path / "sessions")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=server_env(),
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stderr], daemon=True).start()
    try:
        while True:
            line = lines.get(timeout=60)
            if line.startswith("{"):
                address = json.loads(line)
                break
        assert address["url"].startswith("http://127.0.0.1:")
        yield {**address, "pid": str(process.pid), "sessions": str(tmp_path / "sessions")}
    finally:
        if process.poll() is None:
            process.terminate()
        process.wait(20)


@pytest.mark.display
def test_without_the_token_nothing_is_served(http_server):
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    bare = httpx.post(http_server["url"], json=initialize, timeout=10)
    assert bare.status_code == 401 and bare.json()["error"] == NO_TOKEN
    wrong = httpx.post(http_server["url"], json=initialize, headers={"Authorization": "Bearer nope"}, timeout=10)
    assert wrong.status_code == 401 and wrong.json()["error"] == WRONG_TOKEN


@pytest.mark.display
def test_with_the_token_act_clicks_after_approval(http_server, target_window):
    target_window.reset()
    ok = target_window.centre("ok")
    headers = {"Authorization": f"Bearer {http_server['token']}"}

    async def go() -> CallToolResult:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(http_server["url"], http_client=http), client_info=AGENT) as client,
        ):
            person = Person(lambda: approve_once_nothing_happened(target_window))
            result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
            await person.done()
            return result

    result = anyio.run(go)
    assert not result.is_error, result.content
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]


@pytest.mark.display
def test_sigterm_while_a_step_waits_ends_it_stopped_and_nothing_is_done(http_server, target_window):
    target_window.reset()
    ok = target_window.centre("ok")
    headers = {"Authorization": f"Bearer {http_server['token']}"}

    async def call() -> None:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(http_server["url"], http_client=http), client_info=AGENT) as client,
        ):
            await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})

    # The client's call fails when the server goes; what matters is what the server did.
    threading.Thread(target=lambda: _quietly(lambda: anyio.run(call)), daemon=True).start()
    wait_for_panel()
    os.kill(int(http_server["pid"]), signal.SIGTERM)
    session = wait_for_session_end(Path(http_server["sessions"]))
    assert session.outcome == "stopped" and session.end["detail"].startswith("stopped: holodesk mcp received SIGTERM")
    assert panel_hidden()
    assert target_window.sync() == []


def _quietly(work) -> None:
    with contextlib.suppress(BaseException):  # the connection ends with the server: expected here
        work()


def non_loopback_address() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


@pytest.mark.display
def test_nothing_listens_on_the_machines_other_addresses(http_server):
    address = non_loopback_address()
    if address is None:
        pytest.skip("this machine has no address besides loopback to try")
    port = http_server["url"].split(":")[2].split("/")[0]
    with pytest.raises(httpx.ConnectError):
        httpx.post(
            f"http://{address}:{port}/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
            headers={"Authorization": f"Bearer {http_server['token']}"},
            timeout=10,
        )


@pytest.mark.display
def test_a_cancel_over_http_withdraws_the_step(http_server, target_window):
    target_window.reset()
    ok = target_window.centre("ok")
    headers = {"Authorization": f"Bearer {http_server['token']}"}
    seen: dict[str, object] = {}

    async def go() -> None:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=60) as http,
            Client(streamable_http_client(http_server["url"], http_client=http), client_info=AGENT) as client,
        ):
            async with anyio.create_task_group() as tasks:
                scope = anyio.CancelScope()

                async def calling() -> None:
                    with scope:
                        await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
                        seen["answered"] = True

                tasks.start_soon(calling)
                await anyio.to_thread.run_sync(wait_for_panel)
                scope.cancel()
            seen["session"] = await anyio.to_thread.run_sync(wait_for_session_end, Path(http_server["sessions"]))

    anyio.run(go)
    session = seen["session"]
    assert "answered" not in seen
    assert session.outcome == "stopped" and session.end["detail"].startswith("stopped: the MCP client cancelled")
    assert panel_hidden() and target_window.sync() == []
