"""The vLLM tier's server itself: it serves the tiny checkpoint, images included, as the real one would be served."""

from __future__ import annotations

import httpx
import pytest

from bench.rigs.vllm_server import VllmServer

pytestmark = pytest.mark.vllm


def test_serves_the_checkpoint_with_its_context_length(vllm_server: VllmServer) -> None:
    models = httpx.get(vllm_server.base_url + "/models", timeout=30, trust_env=False).json()["data"]
    assert [(m["id"], m["max_model_len"]) for m in models] == [(vllm_server.model, vllm_server.max_model_len)]


def test_an_image_becomes_tiles_of_image_tokens(vllm_server: VllmServer) -> None:
    """One 1280x800 screenshot: 6 tiles of 512 px and a thumbnail, 256 tokens each, so the vision path ran."""
    from PIL import Image

    from holodesk.inference.remote import image_data_url

    def prompt_tokens(with_image: bool) -> int:
        parts: list[dict[str, object]] = [{"type": "text", "text": "Where is the Archive button?"}]
        if with_image:
            url = image_data_url(Image.new("RGB", (1280, 800), (30, 120, 220)))
            parts.append({"type": "image_url", "image_url": {"url": url}})
        body = {
            "model": vllm_server.model,
            "messages": [{"role": "user", "content": parts}],
            "max_tokens": 4,
            "temperature": 0.0,
        }
        answer = httpx.post(vllm_server.base_url + "/chat/completions", json=body, timeout=300, trust_env=False)
        assert answer.status_code == 200, answer.text
        return int(answer.json()["usage"]["prompt_tokens"])

    extra = prompt_tokens(True) - prompt_tokens(False)
    # 7 tiles x 256 image tokens, plus the <img></img> tags and tile markers around them.
    assert 7 * 256 <= extra < 7 * 256 + 64
