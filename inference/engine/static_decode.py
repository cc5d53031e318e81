"""What every family's static decoder shares: a decoded token's inputs as tensors that stay where they are,
the attention layers' key and value slots with their mask, the bookkeeping of one answer's tokens, and the
CUDA graph that replays a decoder's step.

A static decoder takes the state a prefill left in transformers' cache into buffers of a fixed capacity
and decodes one token at a time with no shape depending on the step: the token's key and value go to
the slot `DecodeInputs.slot` names and the query sees every slot up to it through a mask. So a GPU can
capture the step once (`CudaGraphDecoder`) and replay it for each token, and for each later answer that
fits the same buffers (`rebind`). The families' decoders (qwen35_decode, nemotron_decode) bring their
layers' arithmetic; nothing here depends on the device.
"""

from __future__ import annotations

import logging
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from holodesk.inference.errors import BackendError

_log = logging.getLogger(__name__)
# A captured decoder's buffers hold a multiple of this many tokens: an answer that fits replays the last
# graph instead of capturing one (masked slots cost little on a GPU).
GRAPH_CAPACITY_STEP = 2048


def modeling_of(layer: nn.Module) -> ModuleType:
    """The transformers module `layer`'s class comes from: the functions its forward calls (and the kernels
    `kernels.bind_kernels` put in their place)."""
    return sys.modules[type(layer).__module__]


class DecodeError(BackendError):
    """The decoder was asked for more tokens than its buffers hold (a bug in the engine, said in words)."""


class DecodeInputs:
    """A decoded token's inputs as tensors that stay where they are: the token, its M-RoPE position (all three
    axes; a family without rotary angles ignores it), the cache slot its key and value go to, and which
    slots it sees."""

    def __init__(self, device: torch.device, capacity: int) -> None:
        self.token = torch.zeros((1, 1), dtype=torch.long, device=device)
        self.position = torch.zeros((3, 1, 1), dtype=torch.long, device=device)
        self.slot = torch.zeros((1,), dtype=torch.long, device=device)
        self.slots = torch.arange(capacity, device=device).view(1, 1, 1, capacity)  # as the attention's mask
        self.visible = self.slots <= self.slot

    def set(self, token: int, position: int, slot: int) -> None:
        self.token.fill_(token)
        self.position.fill_(position)
        self.slot.fill_(slot)
        torch.le(self.slots, self.slot, out=self.visible)


class LayerState(Protocol):
    """One layer's decode state: the cache layer it copies from, and the copy."""

    cache_layer: Any

    def load(self) -> None: ...


class KeyValueSlots:
    """An attention layer's keys and values, preallocated for `capacity` tokens.

    The slots after the prefill's are written as tokens are decoded and masked out until then: what an
    earlier answer left there is never seen. They start as zeros, so that a masked slot is finite.
    """

    def __init__(self, cache_layer: Any, capacity: int) -> None:
        self.cache_layer = cache_layer
        keys = cache_layer.keys
        shape = (*keys.shape[:-2], capacity, keys.shape[-1])
        self.keys = keys.new_zeros(shape)
        self.values = keys.new_zeros(shape)
        self.length = 0

    def load(self) -> None:
        """The prefill's keys and values into the buffers."""
        self.length = int(self.cache_layer.keys.shape[-2])
        if self.length > self.keys.shape[-2]:
            raise DecodeError(f"capacity {self.keys.shape[-2]} is below the {self.length} tokens already cached")
        self.keys[..., : self.length, :] = self.cache_layer.keys
        self.values[..., : self.length, :] = self.cache_layer.values

    def attend(
        self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, inputs: DecodeInputs, scale: float
    ) -> torch.Tensor:
        """Write the token's `key` and `value` [1, kv heads, 1, dim] to its slot; the attention of `query` [1,
        heads, 1, dim] over the slots it sees, [1, heads, 1, dim]."""
        self.keys.index_copy_(-2, inputs.slot, key)
        self.values.index_copy_(-2, inputs.slot, value)
        # The query heads that share a key-value head (transformers' grouping: head h reads h // group) as
        # that head's query rows: no copy of the keys and values per group, as `enable_gqa` with a mask
        # makes on the CPU (1.0 against 2.1 ms a layer at 7,400 slots).
        heads, kv_heads, dim = query.shape[1], key.shape[1], query.shape[-1]
        out = F.scaled_dot_product_attention(
            query.view(1, kv_heads, heads // kv_heads, dim),
            self.keys,
            self.values,
            attn_mask=inputs.visible,
            scale=scale,
        )
        return out.view(1, heads, 1, dim)


class StaticDecoder(ABC):
    """One answer's decoded tokens after a prefill, for at most `capacity` tokens in all (prefill included).

    A family's decoder fills `states` (one per layer with state, in the cache's layer order: `rebind`
    pairs them with the cache's layers by `layer_index`) and defines `forward`, which reads `inputs` and
    returns the logits [1, vocab] after the token.
    """

    def __init__(self, device: torch.device, capacity: int) -> None:
        self.capacity = capacity
        self.states: list[tuple[int, LayerState]] = []
        self.prefilled = self.decoded = 0
        self.inputs = DecodeInputs(device, capacity)

    @abstractmethod
    def forward(self) -> torch.Tensor:
        """The logits [1, vocab] after the token in `inputs`, each layer's state advanced by it."""

    def load(self) -> None:
        """Every layer's state as the prefill left it (before the first token, or after warm-up runs)."""
        for _, state in self.states:
            state.load()
        # The tokens in the cache: every attention layer holds one key per token (a recurrent state does
        # not count them).
        self.prefilled = next((s.length for _, s in self.states if isinstance(s, KeyValueSlots)), 0)
        self.decoded = 0
        self.inputs.set(0, 0, self.prefilled)

    def rebind(self, cache: Any) -> None:
        """Decode from another prefill's `cache` in the same buffers (a captured graph stays valid)."""
        for index, state in self.states:
            state.cache_layer = cache.layers[index]
        self.load()

    def release(self) -> None:
        """Let go of the cache the buffers were loaded from: a decoder kept for later answers must not keep an
        answer's whole cache alive (`rebind` gives it the next one)."""
        for _, state in self.states:
            state.cache_layer = None

    def place(self, token: int, position: int) -> None:
        """Set the next token, its position and its slot, after the tokens decoded so far."""
        slot = self.prefilled + self.decoded
        if slot >= self.capacity:
            raise DecodeError(f"the decoder's buffers hold {self.capacity} tokens; one more was asked")
        self.inputs.set(token, position, slot)
        self.decoded += 1

    def step(self, token: int, position: int) -> torch.Tensor:
        """The logits [1, vocab] after `token`, decoded at `position` (the family's rotary position, if any)."""
        self.place(token, position)
        return self.forward()


class CudaGraphDecoder:
    """A `StaticDecoder`'s forward captured once as a CUDA graph, replayed for each token.

    One replay launches the whole step (hundreds of kernels) at once: the host no longer paces the GPU.
    Capturing needs warm-up runs first (cuBLAS and Triton set themselves up outside a capture); they
    advance the state, which is then loaded again from the prefill's cache.
    """

    def __init__(self, decoder: StaticDecoder, warmups: int = 2) -> None:
        self.decoder = decoder
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmups):
                decoder.forward()
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.logits = decoder.forward()
        decoder.load()
        decoder.release()

    def rebind(self, cache: Any) -> None:
        """Decode from another prefill's `cache`, replaying the same graph."""
        self.decoder.rebind(cache)
        self.decoder.release()

    def step(self, token: int, position: int) -> torch.Tensor:
        """The logits [1, vocab] after `token` (a view of the graph's output: read it before the next step)."""
        self.decoder.place(token, position)
        self.graph.replay()
        return self.logits


class DecoderSource:
    """Each answer's decoder, made by `make(cache, capacity)`: a fresh one sized to the answer, or on a GPU
    (`graphs`) the last captured one where its buffers hold the answer, else one captured now for a
    capacity rounded up to GRAPH_CAPACITY_STEP. A decoder that cannot be captured (a layer with a host
    synchronisation in it, such as a mixture of experts' routing) decodes eagerly from then on, said once
    in the log."""

    def __init__(self, make: Callable[[Any, int], StaticDecoder], graphs: bool) -> None:
        self.make = make
        self.graphs = graphs
        self._graphed: CudaGraphDecoder | None = None

    def step_for(self, cache: Any, needed: int) -> Callable[[int, int], torch.Tensor]:
        """The step function of a decoder loaded from `cache`, for `needed` tokens in all."""
        if not self.graphs:
            return self.make(cache, needed).step
        if self._graphed is not None and self._graphed.decoder.capacity >= needed:
            self._graphed.rebind(cache)
            return self._graphed.step
        self._graphed = None  # its buffers and graph memory go before the next are made
        decoder = self.make(cache, -(-needed // GRAPH_CAPACITY_STEP) * GRAPH_CAPACITY_STEP)
        try:
            self._graphed = CudaGraphDecoder(decoder)
        except RuntimeError as exc:  # a layer that cannot be captured: eager from now on, said once
            self.graphs = False
            decoder.load()
            _log.warning("decoding without CUDA graphs from now on: the capture failed (%s)", exc)
            return decoder.step
        return self._graphed.step
