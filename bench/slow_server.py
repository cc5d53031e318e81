"""`python -m bench.slow_server LATENCY`: a loopback OpenAI-compatible server that answers after LATENCY s.

The annotate benchmark's stand-in for a busy vLLM: every chat completion is one fixed answer (a
point), streamed as vLLM streams it (a role chunk, the text, the finish, the usage, `[DONE]`) or
sent as one JSON body, after the given latency; `GET /v1/models` lists one model. It prints its base
URL on stdout and serves until its stdin closes. Nothing is checked about the requests: the tests'
fake server (bench/rigs/fake_openai_server.py) does that; this one only has to be cheap and always answer the same.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL = "Hcompany/Holotron-12B"
ANSWER = '{"x": 500, "y": 250}'
USAGE = {"prompt_tokens": 1234, "completion_tokens": 7, "total_tokens": 1241}


def _chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    return {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": MODEL, "choices": [choice]}  # fmt: skip


def _handler(latency_s: float) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as vLLM's server does
        # Headers and body leave in one segment: split small writes meet the client's delayed ACK.
        wbufsize = 1 << 16
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:  # quiet: the bench prints its own table
            pass

        def do_GET(self) -> None:
            if self.path != "/v1/models":
                self._send(404, {"error": {"message": f"no {self.path} here"}})
                return
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"{}")
            time.sleep(latency_s)  # the server's latency: what the benchmark is about
            if not request.get("stream"):
                message = {"role": "assistant", "content": ANSWER}
                choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}
                self._send(200, {"id": "chatcmpl-bench", "object": "chat.completion", "created": int(time.time()),
                                 "model": MODEL, "choices": [choice], "usage": USAGE})  # fmt: skip
                return
            events = [
                _chunk({"role": "assistant", "content": ""}),
                _chunk({"content": ANSWER}),
                _chunk({"content": ""}, finish_reason="stop"),
                {**_chunk({}), "choices": [], "usage": USAGE},
            ]
            body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
            self._send_bytes(200, body.encode(), "text/event-stream")

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            self._send_bytes(status, json.dumps(payload).encode(), "application/json")

        def _send_bytes(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def main(argv: list[str]) -> int:
    latency_s = float(argv[0]) if argv else 0.2
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(latency_s))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="slow-server", daemon=True).start()
    host, port = server.server_address[:2]
    print(f"http://{host!s}:{port}/v1", flush=True)
    sys.stdin.read()  # until the benchmark closes our stdin
    server.shutdown()
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
