"""The tiny NemotronH_Nano_VL_V2 checkpoint builder: deterministic, selectable dtype, the real layout.

Whether vLLM accepts these files is what the server tests show; here, what can be checked without it.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open

from bench.nemotron_tiny import (
    IMAGE_TOKENS_PER_TILE,
    build_nemotron_tiny,
    checkpoint_digest,
)


def _tensors(path: Path) -> dict[str, tuple[str, tuple[int, ...]]]:
    with safe_open(str(path / "model.safetensors"), framework="pt") as f:
        return {name: (str(f.get_slice(name).get_dtype()), tuple(f.get_slice(name).get_shape())) for name in f.keys()}  # noqa: SIM118


def test_same_seed_same_bytes_other_seed_other_weights(tmp_path: Path) -> None:
    a = checkpoint_digest(build_nemotron_tiny(tmp_path / "a"))
    b = checkpoint_digest(build_nemotron_tiny(tmp_path / "b"))
    c = checkpoint_digest(build_nemotron_tiny(tmp_path / "c", seed=1))
    assert a == b
    assert a != c


def test_dtype_is_selectable_and_recorded(tmp_path: Path) -> None:
    for dtype, stored in (("bfloat16", "BF16"), ("float32", "F32")):
        path = build_nemotron_tiny(tmp_path / dtype, dtype=dtype)  # type: ignore[arg-type]
        assert {d for d, _ in _tensors(path).values()} == {stored}
        config = json.loads((path / "config.json").read_text())
        assert config["torch_dtype"] == config["llm_config"]["torch_dtype"] == dtype


def test_real_tensor_names_and_config(tmp_path: Path) -> None:
    path = build_nemotron_tiny(tmp_path / "ckpt")
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["NemotronH_Nano_VL_V2"]
    llm = config["llm_config"]
    names = _tensors(path)
    prefixes = {name.split(".")[0] for name in names}
    assert prefixes == {"language_model", "vision_model", "mlp1"}
    # Every layer of the pattern has its mixer's tensors under backbone.layers.N.
    kinds = {"M": "mixer.A_log", "*": "mixer.q_proj.weight", "-": "mixer.up_proj.weight"}
    for i, kind in enumerate(llm["hybrid_override_pattern"]):
        assert f"language_model.backbone.layers.{i}.{kinds[kind]}" in names
    mamba_in = names["language_model.backbone.layers.0.mixer.in_proj.weight"][1]
    inner = llm["mamba_num_heads"] * llm["mamba_head_dim"]
    assert mamba_in == (2 * inner + 2 * llm["n_groups"] * llm["ssm_state_size"] + llm["mamba_num_heads"], 64)
    assert names["language_model.backbone.embeddings.weight"][1] == (llm["vocab_size"], llm["hidden_size"])
    assert any(n.startswith("vision_model.radio_model.model.blocks.1.") for n in names)
    assert {"mlp1.0.weight", "mlp1.1.weight", "mlp1.3.weight"} <= names.keys()
    assert IMAGE_TOKENS_PER_TILE == 256


def test_tokenizer_has_the_real_special_tokens_as_single_tokens(tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    path = build_nemotron_tiny(tmp_path / "ckpt")
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    config = json.loads((path / "config.json").read_text())
    for token in ("<SPECIAL_10>", "<SPECIAL_11>", "<SPECIAL_12>", "<img>", "</img>", "<image>"):
        ids = tokenizer.encode(f"a{token}b", add_special_tokens=False).ids
        assert tokenizer.token_to_id(token) in ids, token
    assert config["img_context_token_id"] == tokenizer.token_to_id("<image>")
    assert config["eos_token_id"] == tokenizer.token_to_id("<SPECIAL_12>")
    template = json.loads((path / "tokenizer_config.json").read_text())["chat_template"]
    assert "<SPECIAL_11>Assistant" in template
