"""The tiny real-layout checkpoint with weights set so greedy decoding writes one chosen answer.

For tests that need the model to answer something usable (a step the parser accepts and the
performer can run) while everything between the prompt and the text stays real: the tiler, the
vision tower, every layer's forward pass, the hybrid cache, the generation loop, the stop tokens.

The answer text becomes one added token of the tokenizer (the embedding table is padded, so it has
a row already). Two dimensions of the residual stream are then set aside: every token's embedding
but the answer's carries a large value in dimension 0, the answer's in dimension 1, and no other
token has either. The output head reads dimension 0 into the answer's logit and dimension 1 into
the end-of-turn token's; no other row reads them. The layers still run with their random weights,
but their outputs are a few hundredths next to that value, so after the final norm the last
position points along its token's dimension: any prompt is followed by the answer, and the answer
by the end of turn. Nothing here runs the model; the tests that use it check the answer by
generating it.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors.torch import load_file, save_file

from bench.nemotron_tiny import END_OF_TURN, SPECIAL_TOKENS, Dtype, build_nemotron_tiny

EMBEDDINGS = "language_model.backbone.embeddings.weight"
HEAD = "language_model.lm_head.weight"
# The value in the set-aside dimension (the embeddings' other values are ~0.02) and the head's weight on it.
MARK = 1.0
GAIN = 4.0


def build_answering_checkpoint(directory: Path, answer: str, *, dtype: Dtype = "float32", seed: int = 0) -> Path:
    """`build_nemotron_tiny` into `directory`, then taught to answer `answer` to any prompt; returns it."""
    if not answer.strip() or any(special in answer for special in SPECIAL_TOKENS):
        raise ValueError("the answer must be non-blank text without the tokenizer's special tokens")
    path = build_nemotron_tiny(directory, dtype=dtype, seed=seed)
    answer_id = _add_answer_token(path, answer)
    end_id = json.loads((path / "tokenizer.json").read_text(encoding="utf-8"))["added_tokens"]
    end_id = next(token["id"] for token in end_id if token["content"] == END_OF_TURN)

    weights = path / "model.safetensors"
    tensors = load_file(str(weights))
    embeddings, head = tensors[EMBEDDINGS].clone(), tensors[HEAD].clone()
    if answer_id >= embeddings.shape[0]:
        raise ValueError(f"the answer's token id {answer_id} is past the padded vocabulary of {embeddings.shape[0]}")
    embeddings[:, :2] = 0
    embeddings[:, 0] = MARK
    embeddings[answer_id, 0], embeddings[answer_id, 1] = 0, MARK
    head[:, :2] = 0
    head[answer_id, 0] = GAIN
    head[end_id, 1] = GAIN
    tensors[EMBEDDINGS], tensors[HEAD] = embeddings.contiguous(), head.contiguous()
    save_file(tensors, str(weights), metadata={"format": "pt"})
    return path


def _add_answer_token(path: Path, answer: str) -> int:
    """Add `answer` as one plain (not special) token to tokenizer.json and tokenizer_config.json; its id."""
    from tokenizers import AddedToken, Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    tokenizer.add_tokens([AddedToken(answer, normalized=False, special=False)])
    tokenizer.save(str(path / "tokenizer.json"))
    answer_id = tokenizer.token_to_id(answer)
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["added_tokens_decoder"][str(answer_id)] = {
        "content": answer,
        "lstrip": False,
        "normalized": False,
        "rstrip": False,
        "single_word": False,
        "special": False,
    }
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return int(answer_id)
