"""An agent's history as the engine tests send it: a task over N random screenshots, each answered but the last."""

from __future__ import annotations

import numpy as np
from PIL import Image

from holodesk.inference.profiles.base import ChatRequest


def random_screenshot(width: int, height: int, seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def agent_conversation(turns: int, *, max_new_tokens: int = 8, first_width: int = 600) -> ChatRequest:
    """A task over `turns` screenshots (`first_width` wide, 100 px wider each turn, 400 high), each answered but
    the last (the shape of an agent's history)."""
    messages: list[dict[str, object]] = [{"role": "system", "content": "You are a computer-use agent. /no_think"}]
    images = []
    for turn in range(turns):
        messages.append({"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"step {turn}"}]})
        images.append(random_screenshot(first_width + 100 * turn, 400, turn))
        if turn < turns - 1:
            messages.append({"role": "assistant", "content": f'{{"thought": "turn {turn}"}}'})
    return ChatRequest(messages=messages, images=images, max_new_tokens=max_new_tokens)
