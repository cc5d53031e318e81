"""Weights that make greedy decoding write one chosen answer, through the real generation path.

For tests that need a model to answer something usable (a valid step the parser accepts and the
engine executes) while everything between the prompt and the text stays real: the processor, the
vision tower, the language model's forward passes and cache, generate(), the stop tokens, decoding.

The answer is one token of the vocabulary (the caller adds the whole answer text to the tokenizer
as a single token and sizes the embeddings for it). `teach_answer` then:
1. zeroes the output projection of every mixer and MLP block (and its bias): each block adds nothing
   to the residual stream, so the hidden state at a position is the final norm of that position's
   own embedding, whatever came before it (images included);
2. measures that hidden state for each `after` token and for the answer (one forward pass each);
3. writes the output embedding rows: the answer's row points along the `after` tokens' hidden
   states and the end token's row along the answer's, `gain` long, so the prompt's last token is
   followed by the answer and the answer by the end of turn;
4. checks, by forward passes, that greedy decoding now does exactly that (ValueError otherwise).

It takes any causal language model whose blocks name their output projections like Bamba's,
Nemotron-H's and Llama's (`out_proj`, `o_proj`, `down_proj`), and token ids: nothing here knows the
stand-in's architecture.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from transformers import PreTrainedModel

# Output projections of Mamba mixers, attention and MLPs in the Bamba / Nemotron-H / Llama families.
OUTPUT_PROJECTIONS = ("out_proj", "o_proj", "down_proj")


def teach_answer(model: PreTrainedModel, *, after: Sequence[int], answer: int, end: int, gain: float = 8.0) -> None:
    """Set `model`'s weights (in place) so that greedy decoding after any of `after` writes `answer`, then `end`."""
    if not after:
        raise ValueError("name at least one token the answer follows")
    embeddings = model.get_input_embeddings()
    if not isinstance(embeddings, nn.Embedding):
        raise ValueError(f"the model's input embeddings are a {type(embeddings).__name__}, not an embedding table")
    vocabulary = embeddings.weight.shape[0]
    for token in (*after, answer, end):
        if not 0 <= token < vocabulary:
            raise ValueError(f"token id {token} is outside the vocabulary of {vocabulary}")
    if answer in after or end in after or answer == end:
        raise ValueError("the answer, the end token and the tokens the answer follows must be different tokens")
    head = model.get_output_embeddings()
    if not isinstance(head, nn.Linear):
        raise ValueError(f"the model's output embeddings are a {type(head).__name__}, not a linear layer")
    silenced = _silence_blocks(model)
    if not silenced:
        raise ValueError(f"the model has no block output projections named {', '.join(OUTPUT_PROJECTIONS)}")
    if head.weight.data_ptr() == embeddings.weight.data_ptr():
        raise ValueError("the model ties its input and output embeddings: its output rows cannot be set alone")

    device = embeddings.weight.device
    states = {token: _last_hidden_state(model, head, token, device) for token in (*after, answer)}
    towards_answer = torch.stack([_unit(states[token]) for token in after]).sum(dim=0)
    with torch.no_grad():
        head.weight[answer] = (gain * _unit(towards_answer)).to(head.weight.dtype)
        head.weight[end] = (gain * _unit(states[answer])).to(head.weight.dtype)
        if head.bias is not None:
            head.bias[answer] = 0
            head.bias[end] = 0
    for token in after:
        _expect_next(model, token, answer, device)
    _expect_next(model, answer, end, device)


def _silence_blocks(model: nn.Module) -> int:
    silenced = 0
    for name, module in model.named_modules():
        if isinstance(module, nn.Linear) and name.rsplit(".", 1)[-1] in OUTPUT_PROJECTIONS:
            with torch.no_grad():
                module.weight.zero_()
                if module.bias is not None:
                    module.bias.zero_()
            silenced += 1
    return silenced


def _last_hidden_state(model: PreTrainedModel, head: nn.Linear, token: int, device: torch.device) -> torch.Tensor:
    """What the output embeddings are given after `token` alone (float32)."""
    seen: list[torch.Tensor] = []
    hook = head.register_forward_pre_hook(lambda _module, inputs: seen.append(inputs[0].detach()))
    try:
        _forward(model, token, device)
    finally:
        hook.remove()
    return seen[-1][0, -1].float()


def _forward(model: PreTrainedModel, token: int, device: torch.device) -> torch.Tensor:
    with torch.no_grad():
        output = model(input_ids=torch.tensor([[token]], device=device), use_cache=False)
    logits: torch.Tensor = output.logits
    return logits[0, -1]


def _expect_next(model: PreTrainedModel, token: int, wanted: int, device: torch.device) -> None:
    chosen = int(_forward(model, token, device).argmax())
    if chosen != wanted:
        raise ValueError(f"after token {token} greedy decoding picks {chosen}, not {wanted}: the gain is too small")


def _unit(vector: torch.Tensor) -> torch.Tensor:
    norm = vector.norm()
    if float(norm) == 0:
        raise ValueError("a hidden state is zero: the model's final norm erases the token")
    return vector / norm
