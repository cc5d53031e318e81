"""The Holotron engine: Holodesk's generation over the assembled model (prefill, decode, stop, stream, cancel,
reuse). The loop itself, the same for every family, is kept_state.py's; this module brings Nemotron-H's
prompt, images, prefill and decoder (nemotron_decode: static buffers, one CUDA graph replay a token on a GPU).

- Prefill runs the prompt through the model in chunks (bounded activations) into an explicit hybrid
  cache (transformers' `DynamicCache` for Nemotron-H: key/value tensors for the attention layers,
  convolution and SSM state for the Mamba-2 layers); logits are computed for the last position only.
- Decode feeds one token at a time, greedy, until one of the checkpoint's stop tokens (read from
  generation_config.json and the tokenizer, e.g. `<SPECIAL_12>`) or the token limit. Each token can
  be streamed to a callback; a cancel check is read before every token.
- Between requests the engine keeps the cache at two points of the conversation: at its end, before
  the generation prompt (`<SPECIAL_11>Assistant\\n...`), and at the start of the turn that holds its
  oldest screenshot. A Mamba state cannot be rolled back, so a later request resumes from the longest
  of these that its prompt begins with (same ids, same screenshots) and prefills only the rest: the
  end point when the conversation was only appended to, the turn point when the oldest screenshots
  turned into placeholders (the screenshot window moved on). transformers' Nemotron-H continues its
  Mamba layers from a saved state for chunks of any length. Each screenshot's image embeddings are
  computed once and kept while it is in use.

The same engine runs Nemotron-3-Nano-Omni checkpoints (Holotron-3-Nano): the language model has
mixture-of-experts layers (transformers' Nemotron-H runs them) and each image is resized whole
instead of tiled (`omni_images`, vLLM's rule, whose patch budget is the `context` the text leaves).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import torch
from PIL import Image

from holodesk.inference.engine.kept_state import Decoded, Greedy, ImageSpan, KeptState, stop_if_cancelled
from holodesk.inference.engine.kernels import bind_kernels
from holodesk.inference.engine.model import HolotronModel, load_model
from holodesk.inference.engine.nemotron_decode import NemotronDecoder
from holodesk.inference.engine.omni_images import PatchGrid, embed_image, image_pixels, patch_grids
from holodesk.inference.engine.prompt import PromptTokens, tokenize_request
from holodesk.inference.engine.spec import ModelSpec, read_spec
from holodesk.inference.engine.static_decode import DecoderSource
from holodesk.inference.engine.tiles import image_tiles
from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.tiling import TilingSpec, choose_grid

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class EngineResult:
    """One answer with what it cost: ids, per-step top log-probs (when asked), prefill work done."""

    text: str
    prompt_ids: tuple[int, ...]
    new_ids: tuple[int, ...]
    timings: StepTimings
    prefilled_tokens: int
    reused_tokens: int
    top_logprobs: list[dict[int, float]] = field(default_factory=list)
    stopped_on: int | None = None


def stop_token_ids(path: Path, tokenizer: Any) -> list[int]:
    """generation_config.json's eos_token_id(s), then the tokenizer's end-of-sequence token."""
    ids: list[int] = []
    saved = path / "generation_config.json"
    if saved.is_file():
        try:
            value = json.loads(saved.read_text(encoding="utf-8")).get("eos_token_id")
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot read {saved}: {exc}") from exc
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, int) and item not in ids:
                ids.append(item)
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int) and eos not in ids:
        ids.append(eos)
    return ids


def image_fingerprint(image: Image.Image) -> str:
    digest = hashlib.blake2b(image.tobytes(), digest_size=16)
    digest.update(f"{image.mode}{image.size}".encode())
    return digest.hexdigest()


def answer_ids(new_ids: list[int], stopped_on: int | None) -> list[int]:
    """The tokens that are the answer: the stop token that ended it is not."""
    return new_ids[:-1] if stopped_on is not None else new_ids


@dataclass(frozen=True, slots=True)
class StepClock:
    """When a generation started, finished preparing its prompt, produced its first token and ended."""

    started: float
    prepared: float
    first_at: float
    ended: float


def engine_result(
    text: str,
    prompt_ids: list[int],
    decoded: Decoded,
    reused: int,
    clock: StepClock,
) -> EngineResult:
    """A generation's result and its timings, as both families' engines report them."""
    new_ids, tops, stopped_on = decoded
    timings = StepTimings(
        preprocess_s=clock.prepared - clock.started,
        prefill_s=clock.first_at - clock.prepared,
        decode_s=clock.ended - clock.first_at,
        total_s=clock.ended - clock.started,
        tokens_in=len(prompt_ids),
        tokens_out=len(new_ids),
        tokens_reused=reused,
    )
    return EngineResult(
        text=text,
        prompt_ids=tuple(prompt_ids),
        new_ids=tuple(new_ids),
        timings=timings,
        prefilled_tokens=len(prompt_ids) - reused,
        reused_tokens=reused,
        top_logprobs=tops,
        stopped_on=stopped_on,
    )


class Engine:
    """A loaded Nemotron-Nano-VL-v2 checkpoint (Holotron-12B) or Nemotron-3-Nano-Omni checkpoint
    (Holotron-3-Nano) and its generation loop; one request at a time.

    `context` matters to dynamic-resolution images only: the images of a request share what it leaves
    after the text (as vLLM's `max_model_len` does); the default is placement.DEFAULT_CONTEXT.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        device: str = "cpu",
        dtype: str | None = None,
        max_tiles: int = 12,
        reuse: bool = True,
        prefill_chunk: int = 2048,
        attention: str = "sdpa",
        context: int = 16384,
        static_decode: bool = True,
    ) -> None:
        from transformers import PreTrainedTokenizerFast

        self.spec: ModelSpec = read_spec(path)
        self.device = torch.device(device)
        self.dtype: torch.dtype = getattr(torch, dtype or self.spec.dtype)
        self.prefill_chunk = prefill_chunk
        self.context = context
        self.tiling = TilingSpec(
            tile_size=self.spec.tile_size,
            max_tiles=max_tiles,
            use_thumbnail=self.spec.use_thumbnail,
            mean=self.spec.norm_mean,
            std=self.spec.norm_std,
        )
        try:
            # The fast tokenizer class directly: AutoTokenizer would read config.json and run its remote code.
            self.tokenizer = PreTrainedTokenizerFast.from_pretrained(str(self.spec.path), local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"cannot load the tokenizer of {self.spec.path}: {exc}") from exc
        self.stop_ids = stop_token_ids(self.spec.path, self.tokenizer)
        if not self.stop_ids:
            raise ModelLoadError(f"{self.spec.path} names no end-of-turn token: generation would never stop")
        image_tags = {self.tokenizer.convert_tokens_to_ids(tag) for tag in ("<image>", "<img>", "</img>")}
        self._turn_ids = {i for i in self.tokenizer.all_special_ids if i not in image_tags}
        self.model: HolotronModel = load_model(self.spec, self.device, self.dtype, attention)
        # mamba-ssm's Triton kernels in the Mamba-2 layers on a GPU (kernels.py): what runs, for the log.
        self.paths = bind_kernels(self.model, self.device.type)
        # Decoded tokens on static buffers (nemotron_decode), on a GPU one CUDA graph replay each;
        # `static_decode=False` decodes through transformers' forward (the reference the tests compare with).
        self.static_decode = static_decode
        graphs = static_decode and self.device.type == "cuda"
        self._decoders = DecoderSource(partial(NemotronDecoder, self.model.language_model), graphs)
        if graphs:
            self.paths.append("decoded tokens as one CUDA graph replay each, on static buffers")
        elif static_decode:
            self.paths.append("decoded tokens on static buffers")
        _log.info("Holotron engine on %s: %s", self.device, "; ".join(self.paths))
        self._kept = KeptState(reuse)
        # Image embeddings by screenshot fingerprint, most recently used last.
        self._image_cache: OrderedDict[str, torch.Tensor] = OrderedDict()
        self.image_cache_size = 8
        self.vision_runs = 0

    # -- inputs ----------------------------------------------------------------------------------

    def image_token_count(self, image: Image.Image) -> int:
        """Image tokens of `image` alone in a request (dynamic resolution: with no text beside it)."""
        if self.spec.dynamic is not None:
            [grid] = self._patch_grids([image], text_tokens=0)
            return grid.tokens
        return choose_grid(image.width, image.height, self.tiling).count * self.spec.tokens_per_tile

    def _patch_grids(self, images: Sequence[Image.Image], *, text_tokens: int) -> list[PatchGrid]:
        assert self.spec.dynamic is not None
        sizes = [(image.width, image.height) for image in images]
        patch = self.spec.vision.patch
        return patch_grids(sizes, self.spec.dynamic, patch=patch, context=self.context, text_tokens=text_tokens)

    def _layouts(self, request: ChatRequest) -> list[PatchGrid | None]:
        """How each image of `request` becomes tokens: its patch grid (dynamic resolution), or None (tiles)."""
        if self.spec.dynamic is None or not request.images:
            return [None] * len(request.images)
        # vLLM budgets the images with the prompt's text length, counted without the images' tags.
        text = tokenize_request(self.tokenizer, request, [0] * len(request.images))
        return [*self._patch_grids(request.images, text_tokens=len(text.ids) - 2 * len(request.images))]

    def _image_embeddings(self, image: Image.Image, key: str, layout: PatchGrid | None = None) -> torch.Tensor:
        cached = self._image_cache.get(key)
        if cached is not None:
            self._image_cache.move_to_end(key)
            return cached
        if layout is not None:
            embeddings = embed_image(self.model, image_pixels(image, layout, self.spec).to(self.device), layout)
        else:
            embeddings = self.model.embed_images(image_tiles(image, self.tiling).to(self.device))
        self.vision_runs += 1
        self._image_cache[key] = embeddings
        while len(self._image_cache) > self.image_cache_size:
            self._image_cache.popitem(last=False)
        return embeddings

    def tokenize(self, request: ChatRequest) -> PromptTokens:
        return self._tokenize(request, self._layouts(request))

    def _tokenize(self, request: ChatRequest, layouts: list[PatchGrid | None]) -> PromptTokens:
        counts = [
            layout.tokens if layout is not None else self.image_token_count(image)
            for image, layout in zip(request.images, layouts, strict=True)
        ]
        return tokenize_request(self.tokenizer, request, counts)

    def _generation_prompt_length(self, request: ChatRequest) -> int:
        """Tokens of the generation prompt at the end (`<SPECIAL_11>Assistant\\n<think></think>`)."""
        with_prompt = self.tokenizer.apply_chat_template(
            request.messages, tokenize=False, add_generation_prompt=True, **request.chat_template_kwargs
        )
        without = self.tokenizer.apply_chat_template(
            request.messages, tokenize=False, add_generation_prompt=False, **request.chat_template_kwargs
        )
        if not with_prompt.startswith(without) or with_prompt == without:
            return 0
        suffix = with_prompt[len(without) :]
        return len(self.tokenizer(suffix, add_special_tokens=False)["input_ids"])

    # -- the loop --------------------------------------------------------------------------------

    def _embed(
        self, ids: list[int], offset: int, images: list[tuple[int, str, Image.Image, int, PatchGrid | None]]
    ) -> torch.Tensor:
        """Embeddings of ids (which begin at prompt position `offset`), image tokens replaced by the image's."""
        tensor = torch.tensor(ids, device=self.device).unsqueeze(0)
        embeds = self.model.embed_tokens(tensor)
        end = offset + len(ids)
        for start, key, image, count, layout in images:
            lo, hi = max(start, offset), min(start + count, end)
            if lo >= hi:
                continue
            features = self._image_embeddings(image, key, layout)
            embeds[0, lo - offset : hi - offset] = features[lo - start : hi - start].to(embeds.dtype)
        return embeds

    def _forward(self, embeds: torch.Tensor, cache: Any, cancelled: Callable[[], bool] | None = None) -> torch.Tensor:
        logits: torch.Tensor | None = None
        for at in range(0, embeds.shape[1], self.prefill_chunk):
            stop_if_cancelled(cancelled, "during the prefill")
            chunk = embeds[:, at : at + self.prefill_chunk]
            out = self.model.language_model(
                inputs_embeds=chunk, past_key_values=cache, use_cache=True, logits_to_keep=1
            )
            logits = out.logits[:, -1]
        if logits is None:
            raise BackendError("nothing to prefill")
        return logits

    def _turn_start(self, ids: list[int], image_start: int) -> int | None:
        """The position of the last control token (a turn marker such as `<SPECIAL_11>`) before an image."""
        for at in range(image_start - 2, -1, -1):  # image_start - 1 is the image's own `<img>`
            if ids[at] in self._turn_ids:
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
        """Answer `request` greedily: up to `max_new_tokens` (default: the request's), stopping on a stop token.

        `on_token` gets each token id as it is chosen; `cancelled` is asked before each prefill chunk and each
        token, and ends the generation with GenerationCancelled. `top_logprobs` > 0 records that many
        log-probabilities per step; `ignore_stop` decodes past stop tokens (to compare whole sequences with
        another engine).
        """
        from transformers import DynamicCache

        started = time.perf_counter()
        limit = request.max_new_tokens if max_new_tokens is None else max_new_tokens
        if limit < 1:
            raise BackendError(f"max_new_tokens must be at least 1, got {limit}")
        layouts = self._layouts(request)
        prompt = self._tokenize(request, layouts)
        # An image resized to another grid is another input: its embeddings and kept state are not shared.
        keys = [
            image_fingerprint(image) + (f"@{layout.rows}x{layout.columns}" if layout is not None else "")
            for image, layout in zip(request.images, layouts, strict=True)
        ]
        images = [
            (start, key, image, count, layout)
            for start, key, image, count, layout in zip(
                prompt.image_starts, keys, request.images, prompt.image_token_counts, layouts, strict=True
            )
        ]
        cut = len(prompt.ids) - self._generation_prompt_length(request)

        spans = [ImageSpan(start, key, count) for start, key, _, count, _ in images]

        def prefill(lo: int, hi: int, cache: Any) -> torch.Tensor:
            return self._forward(self._embed(prompt.ids[lo:hi], lo, images), cache, cancelled)

        def transformers_decoder(cache: Any) -> Callable[[int, int], torch.Tensor]:
            def next_logits(token: int, step: int) -> torch.Tensor:
                ids = torch.tensor([[token]], device=self.device)
                out = self.model.language_model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
                return out.logits[:, -1]

            return next_logits

        def static_decoder(cache: Any) -> Callable[[int, int], torch.Tensor]:
            # Nemotron-H has no rotary positions: the static decoder's step ignores the second argument.
            return self._decoders.step_for(cache, len(prompt.ids) + limit)

        answered = self._kept.answer(
            prompt.ids,
            spans,
            cut,
            new_cache=lambda: DynamicCache(config=self.model.language_model.config),
            prefill=prefill,
            turn_start=lambda image_start: self._turn_start(prompt.ids, image_start),
            decoder=static_decoder if self.static_decode else transformers_decoder,
            greedy=Greedy(limit, self.stop_ids, ignore_stop, top_logprobs, on_token, cancelled),
            sync=self._sync,
        )
        decoded = answered.decoded
        clock = StepClock(started, answered.prepared, answered.first_at, answered.ended)
        text = self.tokenizer.decode(answer_ids(decoded[0], decoded[2]), skip_special_tokens=True)
        return engine_result(text, prompt.ids, decoded, answered.reused, clock)

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
