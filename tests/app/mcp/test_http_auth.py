"""The HTTP gate: a request from another address, without the token or with another one, never reaches the app."""

from __future__ import annotations

import anyio
import httpx

from holodesk.app.mcp.http_auth import NO_TOKEN, NOT_LOOPBACK, WRONG_TOKEN, LoopbackBearerGate, new_token


def gated(token: str) -> tuple[LoopbackBearerGate, list[str]]:
    reached: list[str] = []

    async def app(scope, receive, send):
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    return LoopbackBearerGate(app, token), reached


def get(gate: LoopbackBearerGate, client: tuple[str, int], headers: dict[str, str]) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=gate, client=client)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            return await http.post("/mcp", headers=headers)

    return anyio.run(go)


def test_only_loopback_with_the_token_reaches_the_app():
    token = new_token()
    gate, reached = gated(token)
    good = {"Authorization": f"Bearer {token}"}
    assert get(gate, ("127.0.0.1", 5000), good).status_code == 200
    assert get(gate, ("::1", 5000), good).status_code == 200
    assert reached == ["/mcp", "/mcp"]

    far = get(gate, ("192.168.1.20", 5000), good)
    assert far.status_code == 403 and far.json()["error"] == NOT_LOOPBACK
    bare = get(gate, ("127.0.0.1", 5000), {})
    assert bare.status_code == 401 and bare.json()["error"] == NO_TOKEN
    wrong = get(gate, ("127.0.0.1", 5000), {"Authorization": f"Bearer {new_token()}"})
    assert wrong.status_code == 401 and wrong.json()["error"] == WRONG_TOKEN
    assert reached == ["/mcp", "/mcp"]  # none of the refused requests got through
