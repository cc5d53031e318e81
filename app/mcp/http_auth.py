"""The HTTP listener's gate: only this computer (a loopback address), and only with the bearer token.

`holodesk mcp --http` binds 127.0.0.1 and generates a token it prints; every HTTP request must come from
a loopback address and carry `Authorization: Bearer <token>`, or it is answered 403 or 401 in words
before the MCP app sees it. There is no unauthenticated listener.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
AsgiApp = Callable[[Scope, Receive, Send], Awaitable[None]]

NOT_LOOPBACK = "holodesk mcp answers only this computer (a loopback address)"
NO_TOKEN = "holodesk mcp needs the bearer token it printed when it started (Authorization: Bearer <token>)"
WRONG_TOKEN = "the bearer token is not the one holodesk mcp printed when it started"


def new_token() -> str:
    """A fresh bearer token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


class LoopbackBearerGate:
    """ASGI middleware in front of the MCP app; lifespan events pass through untouched."""

    def __init__(self, app: AsgiApp, token: str) -> None:
        if len(token) < 16:
            raise ValueError("the bearer token is too short")
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            refusal = self._refusal(scope)
            if refusal is not None:
                status, words = refusal
                await _answer(send, status, words)
                return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        client = scope.get("client")
        if not client or not _is_loopback(str(client[0])):
            return 403, NOT_LOOPBACK
        given = b""
        for name, value in scope.get("headers", []):
            if name.lower() == b"authorization":
                given = value
        if not given:
            return 401, NO_TOKEN
        if not hmac.compare_digest(given, self._expected):
            return 401, WRONG_TOKEN
        return None


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def _answer(send: Send, status: int, words: str) -> None:
    body = json.dumps({"error": words}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b'Bearer realm="holodesk"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
