"""The byte-level BPE tokenizer the tiny checkpoints train, and the token chain a scripted one says.

bench/qwen35_tiny and bench/nemotron_omni_tiny both train a small byte-level BPE on their own corpus
(their control tokens special, their tags added after it) and, for a scripted variant, add each
piece of the script as a token and make the model say those tokens in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def train_tokenizer(
    corpus: Sequence[str],
    vocab_size: int,
    control_tokens: Sequence[str],
    tag_tokens: Sequence[str],
    script: Sequence[str] = (),
    *,
    unk_token: str | None = None,
) -> Any:
    """A byte-level BPE trained on `corpus`, `control_tokens` special, `tag_tokens` and the script's
    pieces added after the learned vocabulary."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token=unk_token) if unk_token is not None else models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[AddedToken(t, special=True, normalized=False) for t in control_tokens],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(corpus) * 4, trainer)
    # The tags come after the learned vocabulary, as added (not special) tokens: decoding keeps them
    # in the text, where the tool and reasoning parsers look for them.
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in tag_tokens])
    # A script piece is stored in the byte-level alphabet, like every learned token, so that it decodes
    # to its text (a space or newline in an added token's content would be dropped by the decoder).
    known = set(control_tokens) | set(tag_tokens)
    bpe.add_tokens([AddedToken(byte_level(t), special=False, normalized=False) for t in script if t not in known])
    return bpe


def byte_level(text: str) -> str:
    """`text` in the byte-level BPE's alphabet (GPT-2's mapping of the 256 bytes to printable characters)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return "".join(mapping[b] for b in text.encode("utf-8"))


def script_chain(tokenizer: Any, script: Sequence[str], known: Sequence[str]) -> list[int]:
    """The script's token ids, from the generation prompt's last token ("\\n" after <think>); a piece
    in `known` (a control token or tag) is its own token, any other one its byte-level form."""
    chain = [_single_token(tokenizer, byte_level("\n"))]
    chain += [_single_token(tokenizer, piece if piece in known else byte_level(piece)) for piece in script]
    if len(set(chain)) != len(chain):
        raise ValueError(f"a scripted answer needs every piece to be a different token: {tuple(script)!r}")
    return chain


def _single_token(tokenizer: Any, token: str) -> int:
    found = tokenizer.token_to_id(token)
    if found is None:
        raise ValueError(f"{token!r} is not a token of this tokenizer")
    return int(found)
