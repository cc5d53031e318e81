"""Reading an answer: one JSON body, or a server-sent event stream, into text, token counts and timings."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn

import httpx

from holodesk.inference.remote.errors import RequestRejectedError, Retryable, ServerTimeoutError
from holodesk.inference.remote.transport import Exchange, Transport, excerpt, is_retryable_status
from holodesk.inference.tool_call_text import ToolCallPiece, tool_call_text


@dataclass(slots=True)
class Answer:
    """One successful chat attempt, before it becomes a Generation."""

    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0
    finish_reason: str | None = None


def as_int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def with_reasoning(reasoning: str, content: str) -> str:
    """Keep reasoning a server split off (vLLM's --reasoning-parser) in the text, as the model wrote it."""
    return f"<think>{reasoning}</think>{content}" if reasoning else content


def answer_text(reasoning: str, content: str, calls: list[ToolCallPiece]) -> str:
    """The answer as one text: reasoning in <think>, the content, then the tool calls."""
    return with_reasoning(reasoning, content + tool_call_text(calls))


def _tool_calls_of_message(http: Transport, message: dict[str, Any], body: bytes) -> list[ToolCallPiece]:
    raw = message.get("tool_calls")
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise http.malformed("a list of 'tool_calls'", body)
    calls = []
    for item in raw:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise http.malformed("a named function in each of its 'tool_calls'", body)
        arguments = function.get("arguments")
        # OpenAI sends a JSON string; a server that sends the object itself is taken at its word.
        text = arguments if isinstance(arguments, str) else json.dumps(arguments if arguments is not None else {})
        calls.append(ToolCallPiece(function["name"], text))
    return calls


def _add_tool_call_deltas(http: Transport, deltas: Any, calls: dict[int, ToolCallPiece], data: str) -> bool:
    """Fragments of streamed tool calls added to `calls` (by their `index`); whether any arrived."""
    if deltas is None:
        return False
    if not isinstance(deltas, list):
        raise http.malformed("a list of 'tool_calls' in an event of its stream", data)
    for delta in deltas:
        index = delta.get("index", 0) if isinstance(delta, dict) else None
        if not isinstance(index, int) or isinstance(index, bool):
            raise http.malformed("an 'index' in each streamed tool call", data)
        piece = calls.setdefault(index, ToolCallPiece())
        function = delta.get("function") if isinstance(delta, dict) else None
        if isinstance(function, dict):
            if isinstance(function.get("name"), str):
                piece.name += function["name"]
            if isinstance(function.get("arguments"), str):
                piece.arguments += function["arguments"]
    return bool(deltas)


def parse_completion(http: Transport, body: bytes) -> Answer:
    parsed = http.parse_json(body, "an answer")
    if not isinstance(parsed, dict):
        raise http.malformed("a JSON object", body)
    choices = parsed.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise http.malformed("'choices'", body)
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise http.malformed("'choices[0].message'", body)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise http.malformed("a text 'content'", body)
    # `reasoning_content` in H Company's docs and older vLLM; vLLM 0.32 names it `reasoning`.
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    calls = _tool_calls_of_message(http, message, body)
    raw_usage = parsed.get("usage")
    usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
    return Answer(
        text=answer_text(reasoning if isinstance(reasoning, str) else "", content or "", calls),
        tokens_in=as_int(usage.get("prompt_tokens")),
        tokens_out=as_int(usage.get("completion_tokens")),
        finish_reason=choices[0].get("finish_reason"),
    )


def read_stream(http: Transport, response: httpx.Response, exchange: Exchange, sent_at: float) -> Answer:
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, ToolCallPiece] = {}
    first_token_at: float | None = None
    last_token_at: float | None = None
    usage: dict[str, Any] = {}
    finish_reason: str | None = None
    done = False
    for data in _sse_data(http, response, exchange):
        if data.strip() == "[DONE]":
            done = True
            break
        try:
            event = json.loads(data)
        except RecursionError:
            raise http.nested_too_deeply("an event of its stream", data) from None
        except ValueError:
            raise http.malformed("JSON in an event of its stream", data) from None
        if not isinstance(event, dict):
            raise http.malformed("a JSON object in an event of its stream", data)
        if "error" in event or event.get("object") == "error":
            _raise_stream_error(http, event, data)
        choices = event.get("choices")
        if not isinstance(choices, list):
            raise http.malformed("'choices' in an event of its stream", data)
        for choice in choices:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if not isinstance(delta, dict):
                raise http.malformed("'delta' in an event of its stream", data)
            piece = delta.get("content")
            thought = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(piece, str) and piece:
                content.append(piece)
            if isinstance(thought, str) and thought:
                reasoning.append(thought)
            called = _add_tool_call_deltas(http, delta.get("tool_calls"), calls, data)
            if (isinstance(piece, str) and piece) or (isinstance(thought, str) and thought) or called:
                last_token_at = time.perf_counter()
                if first_token_at is None:
                    first_token_at = last_token_at
            finish_reason = choice.get("finish_reason") or finish_reason
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
    if not done:
        # The stream ended without [DONE]: the server or a proxy cut it; the answer may be partial.
        raise Retryable(reason="the answer stream ended before [DONE]")
    ended_at = time.perf_counter()
    return Answer(
        text=answer_text("".join(reasoning), "".join(content), [calls[index] for index in sorted(calls)]),
        tokens_in=as_int(usage.get("prompt_tokens")),
        tokens_out=as_int(usage.get("completion_tokens")),
        prefill_s=(first_token_at if first_token_at is not None else ended_at) - sent_at,
        decode_s=(last_token_at - first_token_at) if first_token_at is not None and last_token_at else 0.0,
        finish_reason=finish_reason,
    )


def _sse_data(http: Transport, response: httpx.Response, exchange: Exchange) -> Iterator[str]:
    """The `data` of each server-sent event (multi-line data joined by newlines).

    Lines are split here rather than by httpx so that the answer's byte bound also bounds a
    line that never ends. Keep-alive comments count as silence: after `keepalive_silence_s`
    of nothing else the stream is given up.
    """
    data_lines: list[str] = []
    pending = b""
    last_data_at = time.monotonic()
    for chunk in http.chunks(response, exchange):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if not line:
                if data_lines:
                    yield "\n".join(data_lines)
                    data_lines = []
                continue
            if line.startswith(":"):  # a comment (keep-alive)
                if time.monotonic() - last_data_at > http.keepalive_silence_s:
                    raise ServerTimeoutError(
                        f"{http.base_url} kept the answer stream open with keep-alive comments only, "
                        f"sending no data for {http.keepalive_silence_s:g} s; giving up on it."
                    )
                continue
            last_data_at = time.monotonic()
            name, _, value = line.partition(":")
            if name == "data":
                data_lines.append(value.removeprefix(" "))
    if pending.strip():
        name, _, value = pending.decode("utf-8", errors="replace").rstrip("\r").partition(":")
        if name == "data":
            data_lines.append(value.removeprefix(" "))
    if data_lines:
        yield "\n".join(data_lines)


def _raise_stream_error(http: Transport, event: dict[str, Any], data: str) -> NoReturn:
    """An error sent inside a 200 stream (vLLM does this when generation fails after it started)."""
    nested = event.get("error")
    error: dict[str, Any] = nested if isinstance(nested, dict) else event
    message = str(error.get("message") or error.get("error") or data)
    code = error.get("code")
    status = code if isinstance(code, int) else None
    if status is not None and is_retryable_status(status):
        raise Retryable(reason=f"HTTP {status} inside the stream", status=status, server_message=excerpt(message))
    raise RequestRejectedError(
        f"The server at {http.base_url} stopped the answer with an error: {excerpt(message)}",
        status=status,
        server_message=excerpt(message),
        body_excerpt=excerpt(data),
    )
