"""The Qwen3.5 VL family in the in-process engine: H Company's Holo3, Holo3.1 and Holo4 checkpoints.

`model_type` qwen3_5 (dense: Holo3.1 0.8B-9B, Holo4 27B) and qwen3_5_moe (the 35B-A3B sizes): a
hybrid text model of Gated DeltaNet layers (a recurrent state, like Mamba's) and gated full attention,
with interleaved M-RoPE, and a Qwen3-VL-style ViT. What runs here, and where it comes from:

- The model: transformers' own `Qwen3_5ForConditionalGeneration` / `Qwen3_5MoeForConditionalGeneration`,
  built from config.json and filled from the checkpoint's safetensors under their real names; no code
  from the checkpoint runs (no `trust_remote_code`). A weight the model lacks, or one it does not
  know, fails the load by name (the multi-token-prediction head `mtp.*`, which no step uses, is skipped).
- The prompt: the checkpoint's own chat template over the messages as vLLM's chat endpoint hands them
  to it (`vllm_conversation`: text as parts, string tool-call arguments parsed to objects, image parts
  as `{"type": "image"}`), tokenized by the tokenizer class transformers maps the model type to (the
  one vLLM loads), each `<|image_pad|>` then expanded to the image's token count, as vLLM's processor does.
- Images: transformers' PIL image processor for Qwen2-VL (no torchvision) with the checkpoint's
  preprocessor_config.json: resized to the pixel budget in 32-px steps, 16-px patches, two frames a
  temporal patch; the vision tower merges 2x2 patches into one token.
- Positions: M-RoPE from transformers' `get_rope_index` over the whole prompt (an image advances the
  text position by its larger side in tokens, not by its token count), sliced per prefill chunk;
  each decoded token one past the last.
- The loop (kept_state.py, shared with `runner.Engine`): chunked prefill into transformers' hybrid
  `DynamicCache` (key/value tensors for the attention layers, convolution and recurrent state for the
  DeltaNet ones), then greedy decoding one token at a time (qwen35_decode's static decoder). The
  DeltaNet state cannot be rolled back, so the cache is kept at the same two points of the
  conversation as Holotron's (the end of the conversation before the generation prompt, and the
  start of the turn of the oldest screenshot) and a later request resumes from the longest one its
  prompt begins with.
"""

from __future__ import annotations

import copy
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from holodesk.inference.control_text import neutral_messages
from holodesk.inference.engine.kept_state import Greedy, ImageSpan, KeptState, stop_if_cancelled
from holodesk.inference.engine.kernels import bind_kernels
from holodesk.inference.engine.qwen35_cpu import CPU_PREFILL_CHUNK, accelerate
from holodesk.inference.engine.qwen35_cuda import accelerate_cuda
from holodesk.inference.engine.qwen35_decode import Qwen35Decoder
from holodesk.inference.engine.qwen_tool_calls import parsed_tool_calls
from holodesk.inference.engine.runner import (
    EngineResult,
    StepClock,
    answer_ids,
    engine_result,
    image_fingerprint,
    stop_token_ids,
)
from holodesk.inference.engine.spec import weight_files
from holodesk.inference.engine.static_decode import DecoderSource
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.profiles.base import ChatRequest, Message

MODEL_TYPES = ("qwen3_5", "qwen3_5_moe")
# The profiles the local backend runs this family with (inference/profiles/holo3.py); native tool calls
# are read as vLLM's qwen3_coder parser reads them (qwen_tool_calls).
PROFILES = ("holo3.1", "holo3", "holo4", "holo3.1-tools")
IMAGE_PAD = "<|image_pad|>"
TURN_START = "<|im_start|>"
# Tensors of the checkpoint that no step reads: the multi-token-prediction head (speculative decoding).
_UNUSED_PREFIXES = ("mtp.",)
_log = logging.getLogger(__name__)


def checkpoint_model_type(path: str | Path) -> str | None:
    """config.json's `model_type`, or None when there is no readable config."""
    config = Path(path) / "config.json"
    try:
        value = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError):
        return None
    return value if isinstance(value, str) else None


def is_qwen35(path: str | Path) -> bool:
    return checkpoint_model_type(path) in MODEL_TYPES


def checkpoint_dtype(path: str | Path) -> str:
    """The dtype the checkpoint says its weights are in (config.json, or its text config), else bfloat16."""
    try:
        config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return "bfloat16"
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    for value in (config.get("dtype"), config.get("torch_dtype"), text.get("dtype"), text.get("torch_dtype")):
        if value in ("bfloat16", "float16", "float32"):
            return str(value)
    return "bfloat16"


def vllm_conversation(messages: list[Message]) -> list[Message]:
    """`messages` as vLLM's chat endpoint (content format "openai") hands them to the chat template.

    Text is neutralised first, as the remote backend sends it (`control_text`). String content becomes
    one text part; a tool message's text parts are joined into one string; image parts become
    `{"type": "image"}`; an assistant's tool-call arguments, a JSON string on the wire, become an object
    (vLLM: templates expect a mapping; malformed or non-object JSON becomes {}).
    """
    converted: list[Message] = []
    for message in neutral_messages(messages):
        role = message.get("role")
        content = message.get("content")
        parts: list[dict[str, Any]] = []
        if isinstance(content, str):
            parts = [{"type": "text", "text": content}]
        elif isinstance(content, list):
            for part in content:
                kind = part.get("type")
                if kind == "text":
                    parts.append({"type": "text", "text": part.get("text", "")})
                elif kind in ("image", "image_url"):
                    parts.append({"type": "image"})
                else:
                    raise BackendError(f"a message part of type {kind!r} cannot be sent to this model")
        out: dict[str, Any] = {"role": role, "content": parts}
        if role == "tool":
            out["content"] = "\n".join(str(part["text"]) for part in parts if part["type"] == "text")
            if "tool_call_id" in message:
                out["tool_call_id"] = message["tool_call_id"]
        calls = message.get("tool_calls")
        if role == "assistant" and isinstance(calls, list) and calls:
            out["tool_calls"] = [_parsed_call(call) for call in calls]
        if isinstance(message.get("name"), str):
            out["name"] = message["name"]
        converted.append(out)
    return converted


def _parsed_call(call: dict[str, Any]) -> dict[str, Any]:
    call = copy.deepcopy(call)
    function = call.get("function")
    if isinstance(function, dict):
        arguments = function.get("arguments")
        parsed: object = arguments
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments) if arguments else {}
            except ValueError:
                parsed = {}
        function["arguments"] = parsed if isinstance(parsed, dict) else {}
    return call


@dataclass(frozen=True, slots=True)
class _Pixels:
    """One image as the vision tower takes it: its patches and its (t, h, w) patch grid."""

    values: torch.Tensor
    grid: torch.Tensor  # [1, 3]
    tokens: int


@dataclass(frozen=True, slots=True)
class QwenPrompt:
    """The prompt's ids, each image's first image-token position and count, and its M-RoPE positions."""

    ids: list[int]
    image_starts: list[int]
    image_token_counts: list[int]
    positions: torch.Tensor  # [4, 1, len(ids)]: the sequence index, then M-RoPE's t, h, w
    next_position: int  # the M-RoPE position of the first generated token


def _model_class(model_type: str) -> Any:
    if model_type == "qwen3_5":
        from transformers import Qwen3_5ForConditionalGeneration

        return Qwen3_5ForConditionalGeneration
    if model_type == "qwen3_5_moe":
        from transformers import Qwen3_5MoeForConditionalGeneration

        return Qwen3_5MoeForConditionalGeneration
    raise ModelLoadError(f"config.json: model_type {model_type!r} is not a Qwen3.5 model ({', '.join(MODEL_TYPES)})")


def load_qwen35(path: Path, device: torch.device, dtype: torch.dtype, attention: str = "sdpa") -> Any:
    """transformers' native model for this checkpoint, every weight from its files; ModelLoadError otherwise."""
    model_type = checkpoint_model_type(path)
    if model_type is None:
        raise ModelLoadError(f"{path} has no readable config.json")
    weight_files(path)  # fails in words when there are none
    model_class = _model_class(model_type)
    try:
        model, info = model_class.from_pretrained(
            str(path),
            dtype=dtype,
            attn_implementation=attention,
            local_files_only=True,
            trust_remote_code=False,
            output_loading_info=True,
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ModelLoadError(f"cannot load {path} as {model_class.__name__}: {exc}") from exc
    unexpected = [name for name in info["unexpected_keys"] if not name.startswith(_UNUSED_PREFIXES)]
    for kind, names in (
        ("lacks", info["missing_keys"]),
        ("holds tensors the model has no place for", unexpected),
        ("holds tensors of the wrong shape", info["mismatched_keys"]),
    ):
        if names:
            shown = ", ".join(str(name) for name in list(names)[:5])
            raise ModelLoadError(f"the checkpoint {kind}: {shown} ({len(names)} in all)")
    return model.to(device).eval()


class Qwen35Engine:
    """A loaded Qwen3.5 VL checkpoint (Holo3, Holo3.1, Holo4) and Holodesk's generation loop; one request at a time."""

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        reuse: bool = True,
        prefill_chunk: int = 2048,
        attention: str = "sdpa",
        cpu_paths: bool = True,
    ) -> None:
        """`cpu_paths` False keeps transformers' own code everywhere (qwen35_cpu: the reference to compare with)."""
        from transformers import AutoTokenizer
        from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

        self.path = Path(path)
        config = json.loads((self.path / "config.json").read_text(encoding="utf-8"))
        self.model_type = str(config.get("model_type"))
        self.device = torch.device(device)
        self.dtype: torch.dtype = getattr(torch, dtype or checkpoint_dtype(self.path))
        self.prefill_chunk = prefill_chunk
        try:
            # The class transformers maps qwen3_5 to (its own pre-tokenizer), as vLLM loads it; no remote code.
            self.tokenizer = AutoTokenizer.from_pretrained(
                str(self.path), local_files_only=True, trust_remote_code=False
            )
            self.image_processor = Qwen2VLImageProcessorPil.from_pretrained(str(self.path), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the tokenizer or image processor of {self.path}: {exc}") from exc
        self.stop_ids = stop_token_ids(self.path, self.tokenizer)
        if not self.stop_ids:
            raise ModelLoadError(f"{self.path} names no end-of-turn token: generation would never stop")
        self.image_token_id = int(config["image_token_id"])
        turn_id = self.tokenizer.convert_tokens_to_ids(TURN_START)
        if not isinstance(turn_id, int):
            raise ModelLoadError(f"the tokenizer of {self.path} has no {TURN_START} token: it is not Qwen's")
        self.turn_id = turn_id
        self.model = load_qwen35(self.path, self.device, self.dtype, attention)
        if self.device.type == "cpu":
            # Where flash-linear-attention imports, transformers bound its Triton kernels for every device:
            # CPU tensors go back to transformers' PyTorch code (kernels.py).
            bind_kernels(self.model, "cpu")
        # What runs, for the log and for tests: the CPU's faster paths (qwen35_cpu), the GPU's (qwen35_cuda),
        # or transformers' code (`cpu_paths=False`, the reference).
        self.paths = []
        if cpu_paths:
            self.paths = (
                accelerate_cuda(self.model)
                if self.device.type == "cuda"
                else accelerate(self.model, self.device, attention)
            )
        # Decoded tokens on static buffers (qwen35_decode) where those paths run: they read the fused
        # projections the paths put in place; on a GPU each token is one CUDA graph replay.
        self.static_decode = bool(self.paths)
        graphs = self.static_decode and self.device.type == "cuda"
        if graphs:
            self.paths.append("decoded tokens as one CUDA graph replay each, on static buffers")
        elif self.static_decode:
            self.paths.append("decoded tokens on static buffers, a few operator calls a layer")
        if self.paths and self.device.type == "cpu" and prefill_chunk > CPU_PREFILL_CHUNK:
            self.prefill_chunk = CPU_PREFILL_CHUNK
            self.paths.append(f"prefill in chunks of {CPU_PREFILL_CHUNK} tokens")
        _log.info("Qwen3.5 engine on %s: %s", self.device, "; ".join(self.paths) or "transformers' own code")
        self.merge = int(self.model.config.vision_config.spatial_merge_size)
        self._kept = KeptState(reuse)
        self._decoders = DecoderSource(partial(Qwen35Decoder, self.model), graphs)
        self._pixels: OrderedDict[str, _Pixels] = OrderedDict()
        self._image_cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.image_cache_size = 8
        self.vision_runs = 0

    # -- inputs ----------------------------------------------------------------------------------

    def _pixels_of(self, image: Image.Image, key: str) -> _Pixels:
        cached = self._pixels.get(key)
        if cached is None:
            out = self.image_processor(images=[image.convert("RGB")], return_tensors="pt")
            grid = out["image_grid_thw"]
            cached = _Pixels(out["pixel_values"], grid, int(grid.prod()) // (self.merge * self.merge))
            self._pixels[key] = cached
            while len(self._pixels) > self.image_cache_size:
                self._pixels.popitem(last=False)
        return cached

    def _image_embeddings(self, image: Image.Image, key: str) -> torch.Tensor:
        cached = self._image_cache.get(key)
        if cached is not None:
            self._image_cache.move_to_end(key)
            return cached
        pixels = self._pixels_of(image, key)
        out = self.model.model.get_image_features(
            pixels.values.to(self.device), pixels.grid.to(self.device), return_dict=True
        )
        embeddings = torch.cat(list(out.pooler_output), dim=0)
        self.vision_runs += 1
        self._image_cache[key] = embeddings
        while len(self._image_cache) > self.image_cache_size:
            self._image_cache.popitem(last=False)
        return embeddings

    def render(self, request: ChatRequest) -> str:
        """The prompt text as vLLM renders it for this request (image slots not yet expanded)."""
        rendered = self.tokenizer.apply_chat_template(
            vllm_conversation(request.messages),
            tools=self._tools(request),
            tokenize=False,
            add_generation_prompt=True,
            **request.chat_template_kwargs,
        )
        if not isinstance(rendered, str):
            raise BackendError("the chat template did not render text")
        return rendered

    def tokenize(self, request: ChatRequest, keys: list[str] | None = None) -> QwenPrompt:
        keys = keys or [image_fingerprint(image) for image in request.images]
        pixels = [self._pixels_of(image, key) for image, key in zip(request.images, keys, strict=True)]
        text_ids = list(self.tokenizer(self.render(request), add_special_tokens=False)["input_ids"])
        slots = text_ids.count(self.image_token_id)
        if slots != len(pixels):
            raise BackendError(f"the prompt has {slots} image slots for {len(pixels)} images")
        ids: list[int] = []
        starts: list[int] = []
        for token in text_ids:
            if token == self.image_token_id:
                starts.append(len(ids))
                ids.extend([self.image_token_id] * pixels[len(starts) - 1].tokens)
            else:
                ids.append(token)
        input_ids = torch.tensor([ids])
        types = (input_ids == self.image_token_id).long()
        grids = torch.cat([p.grid for p in pixels]) if pixels else None
        if grids is None:
            mrope = torch.arange(len(ids)).view(1, 1, -1).expand(3, 1, -1)
        else:
            mrope, _ = self.model.model.get_rope_index(input_ids, mm_token_type_ids=types, image_grid_thw=grids)
        positions = torch.cat([torch.arange(len(ids)).view(1, 1, -1), mrope.to(torch.long)], dim=0)
        return QwenPrompt(
            ids=ids,
            image_starts=starts,
            image_token_counts=[p.tokens for p in pixels],
            positions=positions,
            next_position=int(mrope.max()) + 1,
        )

    @staticmethod
    def _tools(request: ChatRequest) -> list[dict[Any, Any] | Callable[..., Any]] | None:
        # vLLM hands the template None, not [], when the request declares no tools.
        return [dict(tool) for tool in request.tools] or None

    def _generation_prompt_length(self, request: ChatRequest) -> int:
        """Tokens of the generation prompt at the end (`<|im_start|>assistant\\n<think>\\n`)."""
        conversation = vllm_conversation(request.messages)
        tools = self._tools(request)
        kwargs = request.chat_template_kwargs
        with_prompt = self.tokenizer.apply_chat_template(
            conversation, tools=tools, tokenize=False, add_generation_prompt=True, **kwargs
        )
        without = self.tokenizer.apply_chat_template(
            conversation, tools=tools, tokenize=False, add_generation_prompt=False, **kwargs
        )
        if not isinstance(with_prompt, str) or not isinstance(without, str):
            return 0
        if not with_prompt.startswith(without) or with_prompt == without:
            return 0
        return len(self.tokenizer(with_prompt[len(without) :], add_special_tokens=False)["input_ids"])

    # -- the loop --------------------------------------------------------------------------------

    def _embed(self, ids: list[int], offset: int, images: list[tuple[int, str, Image.Image, int]]) -> torch.Tensor:
        """Embeddings of ids (which begin at prompt position `offset`), image tokens replaced by the image's."""
        tensor = torch.tensor(ids, device=self.device).unsqueeze(0)
        embeds = self.model.model.language_model.embed_tokens(tensor)
        end = offset + len(ids)
        for start, key, image, count in images:
            lo, hi = max(start, offset), min(start + count, end)
            if lo >= hi:
                continue
            features = self._image_embeddings(image, key)
            embeds[0, lo - offset : hi - offset] = features[lo - start : hi - start].to(embeds.dtype)
        return embeds

    def _forward(
        self, embeds: torch.Tensor, positions: torch.Tensor, cache: Any, cancelled: Callable[[], bool] | None = None
    ) -> torch.Tensor:
        hidden: torch.Tensor | None = None
        for at in range(0, embeds.shape[1], self.prefill_chunk):
            stop_if_cancelled(cancelled, "during the prefill")
            hidden = self.model.model.language_model(
                inputs_embeds=embeds[:, at : at + self.prefill_chunk],
                position_ids=positions[:, :, at : at + self.prefill_chunk].to(self.device),
                past_key_values=cache,
                use_cache=True,
            ).last_hidden_state
        if hidden is None:
            raise BackendError("nothing to prefill")
        # The output head once, for the last position (a 248,320-row head took 110 ms a chunk on the CPU).
        return self.model.lm_head(hidden[:, -1:])[:, -1]

    def _turn_start(self, ids: list[int], image_start: int) -> int | None:
        """The position of the last `<|im_start|>` before an image (the start of its turn)."""
        for at in range(image_start - 1, -1, -1):
            if ids[at] == self.turn_id:
                return at
        return None

    def forget(self) -> None:
        """Drop the kept conversation state (the next request prefills everything)."""
        self._kept.forget()

    @torch.inference_mode()
    def generate(
        self,
        request: ChatRequest,
        *,
        max_new_tokens: int | None = None,
        on_token: Callable[[int], None] | None = None,
        cancelled: Callable[[], bool] | None = None,
        top_logprobs: int = 0,
        ignore_stop: bool = False,
    ) -> EngineResult:
        """Answer `request` greedily, as `runner.Engine.generate` does (same arguments, same result)."""
        from transformers import DynamicCache

        started = time.perf_counter()
        limit = request.max_new_tokens if max_new_tokens is None else max_new_tokens
        if limit < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {limit}")
        keys = [image_fingerprint(image) for image in request.images]
        prompt = self.tokenize(request, keys)
        images = list(zip(prompt.image_starts, keys, request.images, prompt.image_token_counts, strict=True))
        cut = len(prompt.ids) - self._generation_prompt_length(request)

        def prefill(lo: int, hi: int, cache: Any) -> torch.Tensor:
            embeds = self._embed(prompt.ids[lo:hi], lo, images)
            return self._forward(embeds, prompt.positions[:, :, lo:hi], cache, cancelled)

        def decoder(cache: Any) -> Callable[[int, int], torch.Tensor]:
            if self.static_decode:
                return self._static_next_logits(cache, prompt, limit)
            return self._transformers_next_logits(cache, prompt)

        answered = self._kept.answer(
            prompt.ids,
            [ImageSpan(start, key, count) for start, key, _, count in images],
            cut,
            new_cache=lambda: DynamicCache(config=self.model.config.text_config),
            prefill=prefill,
            turn_start=lambda image_start: self._turn_start(prompt.ids, image_start),
            decoder=decoder,
            greedy=Greedy(limit, self.stop_ids, ignore_stop, top_logprobs, on_token, cancelled),
            sync=self._sync,
        )
        decoded = answered.decoded
        text = self.tokenizer.decode(answer_ids(decoded[0], decoded[2]), skip_special_tokens=True)
        assert isinstance(text, str)  # one sequence in, one text out
        if request.tools:  # what vLLM's qwen3_coder tool parser does behind the remote backend
            text = parsed_tool_calls(text, request.tools)
        clock = StepClock(started, answered.prepared, answered.first_at, answered.ended)
        return engine_result(text, prompt.ids, decoded, answered.reused, clock)

    def _static_next_logits(self, cache: Any, prompt: QwenPrompt, limit: int) -> Callable[[int, int], torch.Tensor]:
        """Decoded tokens on static buffers (qwen35_decode), from the state the prefill left in `cache`."""
        step = self._decoders.step_for(cache, len(prompt.ids) + limit)

        def next_logits(token: int, step_index: int) -> torch.Tensor:
            return step(token, prompt.next_position + step_index)

        return next_logits

    def _transformers_next_logits(self, cache: Any, prompt: QwenPrompt) -> Callable[[int, int], torch.Tensor]:
        """Decoded tokens through transformers' own forward (the reference: `cpu_paths=False`)."""

        def next_logits(token: int, step: int) -> torch.Tensor:
            index = len(prompt.ids) + step
            position = prompt.next_position + step
            positions = torch.tensor([[[index]], [[position]], [[position]], [[position]]], device=self.device)
            hidden = self.model.model.language_model(
                input_ids=torch.tensor([[token]], device=self.device),
                position_ids=positions,
                past_key_values=cache,
                use_cache=True,
            ).last_hidden_state
            return self.model.lm_head(hidden[:, -1:])[:, -1]

        return next_logits

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
