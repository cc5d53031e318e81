"""`holodesk mcp --http`: a real server on 127.0.0.1 under Xvfb; the SDK's client with the printed token acts
(after the person approves on the real panel); a request without the token, or with another, is refused."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from holodesk.app.mcp.http_auth import NO_TOKEN, WRONG_TOKEN
from tests.e2e.test_mcp_stdio import AGENT, approve_on_the_panel, server_env
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
        yield address
    finally:
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
        async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
            async with Client(streamable_http_client(http_server["url"], http_client=http), client_info=AGENT) as client:
                helper = threading.Thread(target=approve_on_the_panel, daemon=True)
                helper.start()
                result = await client.call_tool("act", {"action": "click", "x": ok.x, "y": ok.y})
                await anyio.to_thread.run_sync(helper.join, 60)
                return result

    result = anyio.run(go)
    assert not result.is_error, result.content
    assert [e["widget"] for e in target_window.sync() if e["event"] == "clicked"] == ["ok"]
