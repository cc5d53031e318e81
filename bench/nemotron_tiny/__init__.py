"""A tiny random-weight checkpoint in Holotron-12B's real layout (`NemotronH_Nano_VL_V2`), never a real model.

The benchmarks run it (the in-process engine's reuse, vLLM's throughput, a first GPU contact) and the
tests build their vLLM and engine checkpoints with it; it lives here because benchmarks import
nothing from tests/, and like all of bench/ it is not in the wheel.

It is written for engines that implement the architecture themselves (vLLM's `nano_nemotron_vl`
and Holodesk's engine on transformers' native Nemotron-H), so the files follow the real checkpoint
and nothing else:

- config.json: architecture `NemotronH_Nano_VL_V2`, `llm_config` a Nemotron-H (pattern "M-M*-":
  Mamba-2, MLP, Mamba-2, attention, MLP; hidden 64, head_dim 32, which CPU attention accepts),
  `vision_config` a RADIO ViT (`args.model` vit_small, overridden down to 2 layers of 64), 512-px
  tiles of 16-px patches with pixel shuffle 0.5 (256 image tokens a tile), thumbnail, CLIP norms.
- model.safetensors under the real tensor names: `language_model.backbone.*` (transformers' native
  Nemotron-H `model.*` renamed, as in the real checkpoint) and `language_model.lm_head.weight`,
  `vision_model.radio_model.model.*` (C-RADIO's timm names) and `mlp1.{0,1,3}` (the projector).
  Written from the config with torch and safetensors alone, so building depends on no transformers
  version; Mamba's decay is initialised the Mamba-2 way (A in [1, 16], dt log-uniform in
  [1e-3, 1e-1]) so the state carries across tokens and a broken cache shows.
- a byte-level BPE of 500 tokens with the real special tokens (`<SPECIAL_10..12>`, `<img>`, `</img>`,
  `<image>`, `<think>`...) and Nemotron-Nano-v2's chat template, written with `tokenizers` alone.

Deterministic: the same seed and dtype give the same bytes. Builds in about a second.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path
from typing import Any, Literal

import torch
from safetensors.torch import save_file

Dtype = Literal["bfloat16", "float32"]

ARCHITECTURE = "NemotronH_Nano_VL_V2"
MARKER = "holodesk_nemotron_tiny"  # in config.json: this is a test checkpoint, never a real one
HERE = Path(__file__).resolve().parent

PATTERN = "M-M*-"  # the three layer kinds of Nemotron-H: Mamba-2 (M), MLP (-), attention (*)
HIDDEN = 64
ATTENTION_HEADS = 4
KV_HEADS = 2
HEAD_DIM = 32  # CPU attention in vLLM needs 32, 64, 80, 96, 112, 128...: 16 starts, then fails on a request
MLP_HIDDEN = 128
MAMBA_HEADS = 8
MAMBA_HEAD_DIM = 16
MAMBA_GROUPS = 2
MAMBA_STATE = 16
CONV_KERNEL = 4
VIT_HIDDEN = 64
VIT_LAYERS = 2
VIT_HEADS = 2
VIT_MLP = 128
PROJECTOR_HIDDEN = 128
TILE = 512
PATCH = 16
DOWNSAMPLE = 0.5
IMAGE_TOKENS_PER_TILE = int((TILE // PATCH * DOWNSAMPLE) ** 2)
VOCAB_TARGET = 500
# Tokens the real tokenizer also has beyond the chat ones; kept so ids of the image tags are not the last.
EXTRA_SPECIALS = ("<video>", "<so_embedding>", "<so_start>", "<so_end>")
END_OF_TURN = "<SPECIAL_12>"
SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "<SPECIAL_10>",
    "<SPECIAL_11>",
    END_OF_TURN,
    "<image>",
    "<img>",
    "</img>",
    "<think>",
    "</think>",
)
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)

# Nemotron-Nano-v2's template (as in llama.cpp's NVIDIA-Nemotron-Nano-v2.jinja and the model card), with
# content given as a string or a list of text and image parts; an image part renders as the `<image>`
# tag the processor expands. Reasoning is on unless `/no_think` appears in a system or user turn
# (`/think` turns it back on); both markers are removed from the text. User turns end with a newline,
# assistant turns with `<SPECIAL_12>`, the end-of-turn token generation stops on.
CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] == 'image' -%}<image>{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- set ns = namespace(enable_thinking=true) -%}"
    "{%- for message in messages -%}"
    "{%- set text = render(message['content']) -%}"
    "{%- if message['role'] == 'user' or message['role'] == 'system' -%}"
    "{%- if '/think' in text -%}{%- set ns.enable_thinking = true -%}"
    "{%- elif '/no_think' in text -%}{%- set ns.enable_thinking = false -%}{%- endif -%}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{{- '<SPECIAL_10>System\\n'"
    " + render(messages[0]['content']).replace('/think', '').replace('/no_think', '').strip() -}}"
    "{%- set messages = messages[1:] -%}"
    "{%- else -%}{{- '<SPECIAL_10>System\\n' -}}{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- for message in messages -%}"
    "{%- set text = render(message['content']) -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{- '<SPECIAL_11>User\\n' + text.replace('/think', '').replace('/no_think', '').strip() + '\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- if '</think>' in text -%}{%- set text = text.split('</think>')[1] -%}{%- endif -%}"
    "{{- '<SPECIAL_11>Assistant\\n' + text.strip() + '\\n<SPECIAL_12>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<SPECIAL_11>Assistant\\n' -}}"
    "{%- if not ns.enable_thinking -%}{{- '<think></think>' -}}{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

_CORPUS = (
    "You are a computer-use agent. Look at the screenshot and answer with one JSON object. /no_think",
    'Task: archive every unread newsletter in my mail. {"note": null, "thought": "click the inbox", '
    '"tool_call": {"tool_name": "click_desktop", "element": "Inbox", "x": 120, "y": 340}}',
    '{"tool_name": "write_desktop", "content": "hello world", "press_enter": true, "overwrite": false}',
    '{"tool_name": "hotkey_desktop", "keys": ["ctrl", "s"], "repeat_count": 1} {"x": 0.5, "y": 0.25}',
    "scroll_desktop direction down up left right wait_desktop answer update_plan goals title status",
    "Open the settings window, find the display section and set the scale to 150 percent.",
    "System User Assistant Previous steps: 1. clicked the search field 2. typed the query 3. pressed Enter",
    "0 1 2 3 4 5 6 7 8 9 10 100 250 500 750 999 1000 x y element content direction seconds",
)


def build_nemotron_tiny(directory: Path, *, dtype: Dtype = "bfloat16", seed: int = 0) -> Path:
    """Write the checkpoint into `directory` (created; replaced if it exists) and return it."""
    out = Path(directory)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    specials = _specials()
    tokenizer = _train_tokenizer(specials)
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    vocab_size = math.ceil(tokenizer.get_vocab_size() / 64) * 64  # padded like the real embedding table
    config = _config(ids, vocab_size, dtype)
    _write_json(out / "config.json", config)
    shutil.copyfile(HERE / "configuration.py", out / "configuration.py")
    _write_json(
        out / "generation_config.json",
        {"bos_token_id": ids["<s>"], "eos_token_id": [ids["</s>"], ids[END_OF_TURN]], "pad_token_id": ids["<unk>"]},
    )
    _write_json(
        out / "preprocessor_config.json",
        {
            "image_size": TILE,
            "patch_size": PATCH,
            "downsample_ratio": DOWNSAMPLE,
            "max_num_tiles": 12,
            "use_thumbnail": True,
            "norm_mean": list(CLIP_MEAN),
            "norm_std": list(CLIP_STD),
        },
    )
    tokenizer.save(str(out / "tokenizer.json"))
    _write_json(out / "tokenizer_config.json", _tokenizer_config(specials, ids))
    _write_json(
        out / "special_tokens_map.json",
        {"bos_token": "<s>", "eos_token": END_OF_TURN, "unk_token": "<unk>", "pad_token": "<unk>"},
    )
    tensors = {**language_model_tensors(config, seed), **vision_tensors(config, seed)}
    torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    tensors = {name: t.to(torch_dtype).contiguous() for name, t in sorted(tensors.items())}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    _write_json(
        out / "model.safetensors.index.json",
        {
            "metadata": {"total_parameters": sum(t.numel() for t in tensors.values())},
            "weight_map": dict.fromkeys(tensors, "model.safetensors"),
        },
    )
    return out


def checkpoint_digest(path: Path) -> str:
    """A hash of every file of a built checkpoint (names and bytes), to show two builds are the same."""
    digest = hashlib.sha256()
    for file in sorted(p for p in Path(path).iterdir() if p.is_file()):
        digest.update(file.name.encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()


# --- tokenizer ----------------------------------------------------------------------------------


def _specials() -> list[str]:
    return [*SPECIAL_TOKENS, *EXTRA_SPECIALS]


def _train_tokenizer(specials: list[str]) -> Any:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(list(_CORPUS) * 4, trainer)
    return bpe


def _tokenizer_config(specials: list[str], ids: dict[str, int]) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": END_OF_TURN,
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 131072,
        "additional_special_tokens": [t for t in specials if t not in ("<unk>", "<s>", "</s>")],
        "added_tokens_decoder": {
            str(ids[t]): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in specials
        },
        "chat_template": CHAT_TEMPLATE,
    }


# --- config -------------------------------------------------------------------------------------


def _config(ids: dict[str, int], vocab_size: int, dtype: Dtype) -> dict[str, Any]:
    llm = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "vocab_size": vocab_size,
        "hidden_size": HIDDEN,
        "hybrid_override_pattern": PATTERN,
        "num_hidden_layers": len(PATTERN),
        "num_attention_heads": ATTENTION_HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "intermediate_size": MLP_HIDDEN,
        "mlp_hidden_act": "relu2",
        "mamba_num_heads": MAMBA_HEADS,
        "mamba_head_dim": MAMBA_HEAD_DIM,
        "n_groups": MAMBA_GROUPS,
        "ssm_state_size": MAMBA_STATE,
        "conv_kernel": CONV_KERNEL,
        "expand": MAMBA_HEADS * MAMBA_HEAD_DIM // HIDDEN,
        "chunk_size": 128,
        "mamba_hidden_act": "silu",
        "use_conv_bias": True,
        "use_bias": False,
        "attention_bias": False,
        "mlp_bias": False,
        "layer_norm_epsilon": 1e-5,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "rescale_prenorm_residual": True,
        "residual_in_fp32": False,
        "pad_token_id": ids["<unk>"],
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids[END_OF_TURN],
        "torch_dtype": dtype,
    }
    vision = {
        "model_type": "radio",
        "architectures": ["RADIOModel"],
        "patch_size": PATCH,
        "preferred_resolution": [TILE, TILE],
        "max_resolution": 2048,
        "args": {
            # The ViT is looked up by name, then these sizes override it.
            "model": "vit_small_patch16_224",
            "hidden_size": VIT_HIDDEN,
            "num_hidden_layers": VIT_LAYERS,
            "num_attention_heads": VIT_HEADS,
            "intermediate_size": VIT_MLP,
            "register_multiple": 8,
            "cpe_max_size": 2048,
            "cls_token_per_teacher": False,
            "teachers": [],
        },
        "torch_dtype": dtype,
    }
    return {
        "architectures": [ARCHITECTURE],
        "model_type": ARCHITECTURE,
        "auto_map": {"AutoConfig": "configuration.NemotronH_Nano_VL_V2_Config"},
        "llm_config": llm,
        "vision_config": vision,
        "force_image_size": TILE,
        "patch_size": PATCH,
        "downsample_ratio": DOWNSAMPLE,
        "template": "nemotron5",
        "ps_version": "v2",
        "image_tag_type": "internvl",
        "projector_hidden_size": PROJECTOR_HIDDEN,
        "vit_hidden_size": VIT_HIDDEN,
        "norm_mean": list(CLIP_MEAN),
        "norm_std": list(CLIP_STD),
        "use_thumbnail": True,
        "img_context_token_id": ids["<image>"],
        "img_start_token_id": ids["<img>"],
        "img_end_token_id": ids["</img>"],
        "eos_token_id": ids[END_OF_TURN],
        "torch_dtype": dtype,
        MARKER: True,
    }


# --- weights ------------------------------------------------------------------------------------


def language_model_tensors(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """Nemotron-H's tensors under the real checkpoint's names, from the config alone."""
    c = config["llm_config"]
    g = torch.Generator().manual_seed(seed)
    hidden, vocab = c["hidden_size"], c["vocab_size"]
    std = 0.02

    def normal(*shape: int, scale: float = std) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    pre = "language_model.backbone."
    t: dict[str, torch.Tensor] = {
        pre + "embeddings.weight": normal(vocab, hidden),
        pre + "norm_f.weight": torch.ones(hidden),
        "language_model.lm_head.weight": normal(vocab, hidden),
    }
    layers = c["num_hidden_layers"]
    # GPT-2's scaling of the residual projections (rescale_prenorm_residual), as transformers initialises them.
    residual_scale = std / math.sqrt(layers)
    for i, kind in enumerate(c["hybrid_override_pattern"]):
        p = f"{pre}layers.{i}."
        t[p + "norm.weight"] = torch.ones(hidden)
        if kind == "M":
            heads, head_dim = c["mamba_num_heads"], c["mamba_head_dim"]
            inner = heads * head_dim
            groups_state = c["n_groups"] * c["ssm_state_size"]
            conv_dim = inner + 2 * groups_state
            a = torch.empty(heads).uniform_(1.0, 16.0, generator=g)
            dt = torch.exp(torch.empty(heads).uniform_(math.log(1e-3), math.log(1e-1), generator=g)).clamp(min=1e-4)
            bound = 1.0 / math.sqrt(c["conv_kernel"])  # PyTorch's default for a depthwise Conv1d
            t.update(
                {
                    p + "mixer.in_proj.weight": normal(2 * inner + 2 * groups_state + heads, hidden),
                    p + "mixer.conv1d.weight": torch.empty(conv_dim, 1, c["conv_kernel"]).uniform_(
                        -bound, bound, generator=g
                    ),
                    p + "mixer.conv1d.bias": torch.empty(conv_dim).uniform_(-bound, bound, generator=g),
                    p + "mixer.A_log": torch.log(a),
                    p + "mixer.dt_bias": dt + torch.log(-torch.expm1(-dt)),  # inverse of softplus
                    p + "mixer.D": torch.ones(heads),
                    p + "mixer.norm.weight": torch.ones(inner),
                    p + "mixer.out_proj.weight": normal(hidden, inner, scale=residual_scale),
                }
            )
        elif kind == "*":
            q = c["num_attention_heads"] * c["head_dim"]
            kv = c["num_key_value_heads"] * c["head_dim"]
            t.update(
                {
                    p + "mixer.q_proj.weight": normal(q, hidden),
                    p + "mixer.k_proj.weight": normal(kv, hidden),
                    p + "mixer.v_proj.weight": normal(kv, hidden),
                    p + "mixer.o_proj.weight": normal(hidden, q, scale=residual_scale),
                }
            )
        elif kind == "-":
            t.update(
                {
                    p + "mixer.up_proj.weight": normal(c["intermediate_size"], hidden),
                    p + "mixer.down_proj.weight": normal(hidden, c["intermediate_size"], scale=residual_scale),
                }
            )
        else:
            raise ValueError(f"unknown Nemotron-H layer kind {kind!r} in {c['hybrid_override_pattern']!r}")
    return t


def vision_tensors(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """C-RADIO's ViT (timm names) and the projector, under the real checkpoint's names."""
    g = torch.Generator().manual_seed(seed + 1)
    vc = config["vision_config"]
    args = vc["args"]
    h, mlp, p = args["hidden_size"], args["intermediate_size"], vc["patch_size"]
    grid = round(args["cpe_max_size"] / p)
    register = args.get("register_multiple") or 0
    # One class token, padded with registers up to the register multiple (C-RADIO's layout).
    cls_rows = math.ceil(1 / register) * register if register else 1

    def normal(*shape: int, scale: float = 0.02) -> torch.Tensor:
        return torch.randn(*shape, generator=g) * scale

    pre = "vision_model.radio_model."
    t: dict[str, torch.Tensor] = {
        pre + "model.patch_generator.pos_embed": normal(1, grid * grid, h, scale=h**-0.5),
        pre + "model.patch_generator.embedder.weight": normal(h, 3 * p * p),
        pre + "model.patch_generator.cls_token.token": normal(cls_rows, h),
        pre + "input_conditioner.norm_mean": torch.tensor(config["norm_mean"]).view(3, 1, 1),
        pre + "input_conditioner.norm_std": torch.tensor(config["norm_std"]).view(3, 1, 1),
    }
    for i in range(args["num_hidden_layers"]):
        b = f"{pre}model.blocks.{i}."
        t.update(
            {
                b + "norm1.weight": torch.ones(h),
                b + "norm1.bias": torch.zeros(h),
                b + "attn.qkv.weight": normal(3 * h, h),
                b + "attn.qkv.bias": torch.zeros(3 * h),
                b + "attn.proj.weight": normal(h, h),
                b + "attn.proj.bias": torch.zeros(h),
                b + "norm2.weight": torch.ones(h),
                b + "norm2.bias": torch.zeros(h),
                b + "mlp.fc1.weight": normal(mlp, h),
                b + "mlp.fc1.bias": torch.zeros(mlp),
                b + "mlp.fc2.weight": normal(h, mlp),
                b + "mlp.fc2.bias": torch.zeros(h),
            }
        )
    shuffle = round(1 / config["downsample_ratio"])
    vit_in = config["vit_hidden_size"] * shuffle * shuffle
    t.update(
        {
            "mlp1.0.weight": torch.ones(vit_in),  # RMSNorm over the pixel-shuffled ViT features
            "mlp1.1.weight": normal(config["projector_hidden_size"], vit_in),
            "mlp1.3.weight": normal(config["llm_config"]["hidden_size"], config["projector_hidden_size"]),
        }
    )
    return t


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    print(build_nemotron_tiny(ns.out, dtype=ns.dtype, seed=ns.seed))
