"""The conversation state an engine keeps between steps, and one greedy answer from it: the resume rules, the
snapshots, the order of the prefill and the decode loop, the same for every family.

Each family's engine (runner.py for Holotron's Nemotron-H, qwen35.py for the Qwen3.5 models) brings
only what differs: its prompt (ids, where its images lie, where the generation prompt begins), its
forward over a span of the prompt into a cache, a fresh cache, where the oldest screenshot's turn
begins, and its decoder. A fix to resuming, or a faster decode, then reaches every model at once.

The rules, for a prompt whose conversation (everything before the generation prompt) ends at `cut`:
- resume from the longest kept snapshot that is a prefix of the conversation, with the same images at
  the same places, no image cut in two, and at least one token left to prefill (for logits);
- keep two snapshots for the next step: the conversation up to the turn of the oldest screenshot
  shown (a sliding window turns that screenshot into text next step, and a recurrent state cannot be
  rolled back into it), and the whole conversation;
- prefill what is left, then the generation prompt, and decode greedily;
- a failure leaves no half-updated state: the snapshots are replaced only when the answer is done.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from holodesk.inference.errors import BackendError

# The ids chosen, each step's top log-probs (when asked), and the stop token that ended the answer if one did.
Decoded = tuple[list[int], list[dict[int, float]], int | None]


class GenerationCancelled(BackendError):
    """The cancel check said stop part-way; there is no answer."""


def stop_if_cancelled(cancelled: Callable[[], bool] | None, where: str) -> None:
    """GenerationCancelled when `cancelled` says stop: asked before each prefill chunk and each decoded token,
    so a stop is answered within one chunk (a second or two on a CPU) rather than after the whole prompt."""
    if cancelled is not None and cancelled():
        raise GenerationCancelled(f"generation was cancelled {where}")


@dataclass(frozen=True, slots=True)
class Greedy:
    """How to decode: at most `limit` tokens, ending at a stop token unless `ignore_stop`, with `top_logprobs`
    log-probs a step, each token to `on_token`, and `cancelled` asked before each."""

    limit: int
    stop_ids: Sequence[int]
    ignore_stop: bool = False
    top_logprobs: int = 0
    on_token: Callable[[int], None] | None = None
    cancelled: Callable[[], bool] | None = None


def greedy_tokens(logits: torch.Tensor, next_logits: Callable[[int, int], torch.Tensor], greedy: Greedy) -> Decoded:
    """Holodesk's greedy loop, the same for every family: from the prefill's last `logits`, choose a token,
    and ask `next_logits(token, step)` (the family's forward of that token at decoding step `step`) for
    the next, as `greedy` says. Returns the ids, each step's top log-probs (when asked) and the stop token
    that ended it, if one did."""
    new_ids: list[int] = []
    tops: list[dict[int, float]] = []
    for step in itertools.count():
        stop_if_cancelled(greedy.cancelled, "between decoded tokens")
        if greedy.top_logprobs:
            values, indices = torch.log_softmax(logits[0].float(), dim=-1).topk(greedy.top_logprobs)
            tops.append(dict(zip(indices.tolist(), values.tolist(), strict=True)))
        token = int(logits[0].argmax())
        new_ids.append(token)
        if greedy.on_token is not None:
            greedy.on_token(token)
        if token in greedy.stop_ids and not greedy.ignore_stop:
            return new_ids, tops, token
        if len(new_ids) >= greedy.limit:
            return new_ids, tops, None
        logits = next_logits(token, step)
    raise AssertionError("unreachable: itertools.count() never ends")


@dataclass(frozen=True, slots=True)
class ImageSpan:
    """Where one image's tokens lie in the prompt, and what the image is (its fingerprint)."""

    start: int
    key: str
    count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The cache after `ids` (a prefix of the conversation) with these images (start, key) in it."""

    ids: list[int]
    images: list[tuple[int, str]]
    cache: Any


@dataclass(frozen=True, slots=True)
class Answered:
    """One answer: the decoded ids, log-probs and stop token; the tokens resumed from; when each phase ended."""

    decoded: Decoded
    reused: int
    prepared: float
    first_at: float
    ended: float


class KeptState:
    """The snapshots kept between one engine's steps (none when `reuse` is off)."""

    def __init__(self, reuse: bool) -> None:
        self.reuse = reuse
        self.snapshots: list[Snapshot] = []

    def forget(self) -> None:
        """Drop the kept conversation state (the next request prefills everything)."""
        self.snapshots = []

    def answer(
        self,
        ids: list[int],
        images: Sequence[ImageSpan],
        cut: int,
        *,
        new_cache: Callable[[], Any],
        prefill: Callable[[int, int, Any], torch.Tensor],
        turn_start: Callable[[int], int | None],
        decoder: Callable[[Any], Callable[[int, int], torch.Tensor]],
        greedy: Greedy,
        sync: Callable[[], None],
    ) -> Answered:
        """Answer the prompt `ids` (its conversation ends at `cut`): `prefill(lo, hi, cache)` runs ids[lo:hi]
        into `cache` and returns the last logits; `turn_start(image_start)` is where the turn holding the
        image that starts there begins; `decoder(cache)` gives the family's `next_logits(token, step)`."""
        prefix_images = [(image.start, image.key) for image in images if image.start + image.count <= cut]
        saved = self.snapshots if self.reuse else []
        self.snapshots = []  # rebuilt below; a failure leaves no half-updated state behind

        def resumable(point: Snapshot) -> bool:
            return (
                len(point.ids) <= cut
                and len(point.ids) < len(ids)  # at least one token must go through the model for logits
                and ids[: len(point.ids)] == point.ids
                and prefix_images[: len(point.images)] == point.images
                and all(i.start + i.count <= len(point.ids) or i.start >= len(point.ids) for i in images)
            )

        usable = [point for point in saved if resumable(point)]
        start_from = max(usable, key=lambda point: len(point.ids), default=None)
        if start_from is not None:
            # A copy: the snapshot may be kept for a later request too.
            cache, reused = copy.deepcopy(start_from.cache), len(start_from.ids)
        else:
            cache, reused = new_cache(), 0
        first = images[0] if images else None
        turn = turn_start(first.start) if first is not None and first.start + first.count <= cut else None
        kept = [point for point in usable if turn is not None and len(point.ids) == turn]
        prepared = time.perf_counter()

        logits: torch.Tensor | None = None
        resume_at = reused
        if self.reuse and turn is not None and turn > reused and not kept:
            logits = prefill(reused, turn, cache)
            resume_at = turn
            kept = [Snapshot(ids=ids[:turn], images=[], cache=copy.deepcopy(cache))]
        if cut > resume_at:
            logits = prefill(resume_at, cut, cache)
        snapshots: list[Snapshot] = []
        if self.reuse:
            snapshots = [*kept, Snapshot(ids=ids[:cut], images=prefix_images, cache=copy.deepcopy(cache))]
        if cut < len(ids):
            logits = prefill(max(cut, resume_at), len(ids), cache)
        assert logits is not None  # at least one token always goes through the model (resumable's rule)
        sync()
        first_at = time.perf_counter()
        decoded = greedy_tokens(logits, decoder(cache), greedy)
        sync()
        ended = time.perf_counter()
        if self.reuse:
            self.snapshots = snapshots
        return Answered(decoded, reused, prepared, first_at, ended)
