"""What goes into a chat request: the API root, images as data URLs, messages, the token budget, the payload."""

from __future__ import annotations

import base64
import io
from typing import Any, Literal
from urllib.parse import urlsplit

from PIL import Image

from holodesk.inference.control_text import neutral_messages, neutralise
from holodesk.inference.fast_png import encode_png
from holodesk.inference.profiles.base import ChatRequest, Message
from holodesk.inference.profiles.schema_bounds import UnboundedSchemaError, longest_answer_bytes

ImageFormat = Literal["png", "jpeg"]

# Words a server uses when it refuses the structured-output field (vLLM, xgrammar, other servers).
_STRUCTURED_OUTPUT_MARKERS = ("response_format", "json_schema", "json schema", "structured", "guided", "grammar")


def normalize_base_url(base_url: str) -> str:
    """The API root, without a trailing slash: "http://gpu:8000" and "gpu:8000/" become "http://gpu:8000/v1".

    A URL that already has a path (".../v1", a proxy's "/openai/v1") is kept as it is.
    """
    url = base_url.strip().rstrip("/")
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"the server URL must start with http:// or https://, got {base_url!r}")
    if not parts.hostname:
        raise ValueError(f"cannot find a host name in the server URL {base_url!r}")
    if parts.path in ("", "/"):
        url += "/v1"
    return url


def image_data_url(image: Image.Image, image_format: ImageFormat = "png") -> str:
    """`image` as a data URL. RGB only: servers convert to RGB anyway and alpha would only cost bytes."""
    if image.mode != "RGB":
        image = image.convert("RGB")
    if image_format == "png":
        # Lossless, without Pillow's per-row filter search: 2.5x cheaper on screenshots (see fast_png).
        data = encode_png(image)
        mime = "image/png"
    elif image_format == "jpeg":
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        data = buffer.getvalue()
        mime = "image/jpeg"
    else:
        raise ValueError(f"image_format must be 'png' or 'jpeg', got {image_format!r}")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def messages_with_images(messages: list[Message], image_urls: list[str]) -> list[Message]:
    """A copy of `messages` whose `{"type": "image"}` placeholders become image_url parts, in order.

    Their text is neutralised first (`control_text`): nothing in it can become a control token on the server.
    """
    urls = iter(image_urls)
    converted: list[Message] = []
    used = 0
    for message in neutral_messages(messages):
        _neutralise_tool_calls(message)
        content = message.get("content")
        if isinstance(content, list):
            parts: list[dict[str, Any]] = []
            for part in content:
                if part.get("type") == "image":
                    url = next(urls, None)
                    if url is None:
                        raise ValueError("more image placeholders than images")
                    used += 1
                    parts.append({"type": "image_url", "image_url": {"url": url}})
                else:
                    parts.append(part)
            message["content"] = parts
        converted.append(message)
    if used != len(image_urls):
        raise ValueError(f"{len(image_urls)} images but only {used} image placeholders")
    return converted


def _neutralise_tool_calls(message: Message) -> None:
    """An earlier step's tool call, written back, holds text too (typed text, a description): the chat
    template renders its arguments as they are, so they are neutralised like any other text."""
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        return
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict) and isinstance(function.get("arguments"), str):
            # Control-token shapes can only sit inside JSON strings, so the JSON stays valid.
            function["arguments"] = neutralise(function["arguments"])


def max_tokens_for(request: ChatRequest, with_schema: bool) -> int:
    """The request's token budget, raised to what the longest answer its schema allows can take.

    A server that constrains decoding to the schema ends a string only at its closing quote: cut at
    max_tokens first, the answer never parses. The schema's bounds make that length finite (the
    profiles' schemas all have them); an unbounded schema keeps the request's own budget.
    """
    if not with_schema or request.response_schema is None:
        return request.max_new_tokens
    try:
        longest = longest_answer_bytes(request.response_schema)
    except UnboundedSchemaError:
        return request.max_new_tokens
    return max(request.max_new_tokens, longest)


def mentions_structured_output(message: str) -> bool:
    """Whether a server's refusal is about the structured-output field (so the request can go without it)."""
    lowered = message.lower()
    return any(marker in lowered for marker in _STRUCTURED_OUTPUT_MARKERS)


def build_payload(
    model: str,
    messages: list[Message],
    request: ChatRequest,
    *,
    with_schema: bool,
    temperature: float,
    stream: bool,
) -> dict[str, Any]:
    """The JSON body of one POST /chat/completions."""
    payload: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "max_tokens": max_tokens_for(request, with_schema),
        "temperature": temperature,
    }
    if request.chat_template_kwargs:
        payload["chat_template_kwargs"] = dict(request.chat_template_kwargs)
    if request.tools:
        payload["tools"] = list(request.tools)
        if request.tool_choice is not None:
            payload["tool_choice"] = request.tool_choice
    if with_schema and request.response_schema is not None:
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "holodesk_answer", "schema": request.response_schema},
        }
    if stream:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
    return payload
