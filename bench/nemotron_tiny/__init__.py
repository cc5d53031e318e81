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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Variant:
    """The shapes and weight statistics of one tiny checkpoint; the defaults are the original one ("reference").

    Random weights of std 0.02 with unit norms and no biases keep every activation tiny, and a
    checkpoint like that hides differences between two implementations (a dt clamp at 1e-3 never
    bites when every dt is above it). `realistic` weights (std gain/sqrt(fan_in), norms around 1
    but not 1, biases, D away from 1, dt spread from far below 1e-3 to 0.1) make them show.
    """

    name: str = "reference"
    pattern: str = "M-M*-"
    hidden: int = 64
    attention_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32
    mlp_hidden: int = 128
    mamba_heads: int = 8
    mamba_head_dim: int = 16
    mamba_groups: int = 2
    mamba_state: int = 16
    vit_hidden: int = 64
    vit_layers: int = 2
    vit_heads: int = 2
    vit_mlp: int = 128
    cls_tokens: int = 1  # more than one: one class token per teacher (cls_token_per_teacher)
    register_multiple: int = 8  # class tokens + registers fill a multiple of this
    projector_hidden: int = 128
    # Statistics: None keeps the original draws (std 0.02, unit norms, no biases, D = 1, dt in [1e-3, 1e-1]).
    realistic: bool = False
    dt_range: tuple[float, float] = (1e-3, 1e-1)
    d_range: tuple[float, float] = (1.0, 1.0)
    # Embedding and output rows beyond the tokenizer's (the real table has 131072); None pads to a multiple of 64.
    vocab_rows: int | None = None
    # timm's name for the ViT (the sizes above override it; a real-shaped variant names the real one).
    vit_model: str = "vit_small_patch16_224"


VARIANTS: dict[str, Variant] = {
    "reference": Variant(),
    # The layout of the independent check that found the dt clamp: an MLP first, attention pairs,
    # Mamba pairs, one KV head, four Mamba groups; RADIO with 3 class tokens and 13 registers.
    "realistic": Variant(
        name="realistic",
        pattern="-**MM-M*-M",
        hidden=128,
        attention_heads=4,
        kv_heads=1,
        head_dim=32,
        mlp_hidden=256,
        mamba_heads=8,
        mamba_head_dim=16,
        mamba_groups=4,
        mamba_state=32,
        vit_hidden=96,
        vit_layers=2,
        vit_heads=3,
        vit_mlp=192,
        cls_tokens=3,
        register_multiple=16,
        projector_hidden=192,
        realistic=True,
        dt_range=(1e-5, 1e-1),
        d_range=(-1.0, 3.0),
    ),
    # Another head layout: no grouped-query sharing, one Mamba group, wider heads and state, a longer
    # stack ending in attention; RADIO with 2 class tokens padded to 8.
    "wide-heads": Variant(
        name="wide-heads",
        pattern="M*M-MM*",
        hidden=64,
        attention_heads=2,
        kv_heads=2,
        head_dim=32,
        mlp_hidden=192,
        mamba_heads=4,
        mamba_head_dim=32,
        mamba_groups=1,
        mamba_state=64,
        vit_hidden=64,
        vit_layers=3,
        vit_heads=2,
        vit_mlp=256,
        cls_tokens=2,
        register_multiple=8,
        projector_hidden=96,
        realistic=True,
        dt_range=(3e-6, 3e-2),
        d_range=(-2.0, 2.0),
    ),
    # Holotron-12B's real shapes (Nemotron-Nano-12B-v2-VL: a 62-layer Nemotron-H of hidden 5120 and a
    # ViT-H/16 RADIO), with realistic random weights: for a GPU's first contact (bf16, kernels, memory
    # plan, timings) where the real weights are not at hand. 13.2 billion parameters; build it on
    # the GPU (`device="cuda"`): drawing it on a CPU takes minutes. The tokenizer stays the tiny one, so
    # most of the 131072 rows are never a prompt token; answers are random text, timed all the same.
    "holotron-12b-shapes": Variant(
        name="holotron-12b-shapes",
        pattern="M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M*-M-M-M-M-",
        hidden=5120,
        attention_heads=40,
        kv_heads=8,
        head_dim=128,
        mlp_hidden=20480,
        mamba_heads=128,
        mamba_head_dim=80,
        mamba_groups=8,
        mamba_state=128,
        vit_hidden=1280,
        vit_layers=32,
        vit_heads=16,
        vit_mlp=5120,
        cls_tokens=4,
        register_multiple=8,
        projector_hidden=20480,
        realistic=True,
        dt_range=(1e-4, 1e-1),
        d_range=(0.5, 1.5),
        vocab_rows=131072,
        vit_model="vit_huge_patch16_224",
    ),
}

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


def build_nemotron_tiny(
    directory: Path,
    *,
    dtype: Dtype = "bfloat16",
    seed: int = 0,
    variant: Variant | str = "reference",
    device: str = "cpu",
) -> Path:
    """Write the checkpoint into `directory` (created; replaced if it exists) and return it.

    `device` is where the weights are drawn: the same seed draws other numbers on a GPU than on the CPU.
    """
    shape = VARIANTS[variant] if isinstance(variant, str) else variant
    out = Path(directory)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    specials = _specials()
    tokenizer = _train_tokenizer(specials)
    ids = {token: tokenizer.token_to_id(token) for token in specials}
    vocab_size = math.ceil(tokenizer.get_vocab_size() / 64) * 64  # padded like the real embedding table
    if shape.vocab_rows is not None:
        vocab_size = max(vocab_size, shape.vocab_rows)
    config = _config(ids, vocab_size, dtype, shape)
    write_json(out / "config.json", config)
    shutil.copyfile(HERE / "configuration.py", out / "configuration.py")
    write_json(
        out / "generation_config.json",
        {"bos_token_id": ids["<s>"], "eos_token_id": [ids["</s>"], ids[END_OF_TURN]], "pad_token_id": ids["<unk>"]},
    )
    write_json(
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
    write_json(out / "tokenizer_config.json", _tokenizer_config(specials, ids))
    write_json(
        out / "special_tokens_map.json",
        {"bos_token": "<s>", "eos_token": END_OF_TURN, "unk_token": "<unk>", "pad_token": "<unk>"},
    )
    with torch.device(device):  # every tensor the builders make is made there
        tensors = {
            **language_model_tensors(config, seed, shape, device),
            **vision_tensors(config, seed, shape, device),
        }
    write_weights(out, tensors, dtype)
    return out


def write_weights(out: Path, tensors: dict[str, torch.Tensor], dtype: Dtype) -> None:
    """`tensors` in `dtype` as out/model.safetensors (sorted by name) with its index, as real checkpoints ship."""
    torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    tensors = {name: t.to(torch_dtype).contiguous().cpu() for name, t in sorted(tensors.items())}
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_json(
        out / "model.safetensors.index.json",
        {
            "metadata": {"total_parameters": sum(t.numel() for t in tensors.values())},
            "weight_map": dict.fromkeys(tensors, "model.safetensors"),
        },
    )


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


def _config(ids: dict[str, int], vocab_size: int, dtype: Dtype, v: Variant) -> dict[str, Any]:
    llm = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "vocab_size": vocab_size,
        "hidden_size": v.hidden,
        "hybrid_override_pattern": v.pattern,
        "num_hidden_layers": len(v.pattern),
        "num_attention_heads": v.attention_heads,
        "num_key_value_heads": v.kv_heads,
        "head_dim": v.head_dim,
        "intermediate_size": v.mlp_hidden,
        "mlp_hidden_act": "relu2",
        "mamba_num_heads": v.mamba_heads,
        "mamba_head_dim": v.mamba_head_dim,
        "n_groups": v.mamba_groups,
        "ssm_state_size": v.mamba_state,
        "conv_kernel": CONV_KERNEL,
        "expand": v.mamba_heads * v.mamba_head_dim // v.hidden,
        "chunk_size": 128,
        "mamba_hidden_act": "silu",
        "use_conv_bias": True,
        "use_bias": v.realistic,
        "attention_bias": False,
        "mlp_bias": v.realistic,
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
            "model": v.vit_model,
            "hidden_size": v.vit_hidden,
            "num_hidden_layers": v.vit_layers,
            "num_attention_heads": v.vit_heads,
            "intermediate_size": v.vit_mlp,
            "register_multiple": v.register_multiple,
            "cpe_max_size": 2048,
            "cls_token_per_teacher": v.cls_tokens > 1,
            "teachers": [{"name": f"teacher{i}", "use_summary": True} for i in range(v.cls_tokens)]
            if v.cls_tokens > 1
            else [],
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
        "projector_hidden_size": v.projector_hidden,
        "vit_hidden_size": v.vit_hidden,
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


class _Draws:
    """Random tensors for one part of the checkpoint, with the variant's statistics.

    The reference variant draws exactly what the original builder drew (std 0.02, unit norms, zero
    biases), so its bytes do not change; a realistic one scales weights to their fan-in and draws
    norms and biases from a second generator.
    """

    def __init__(self, seed: int, variant: Variant, std: float = 0.02, device: str = "cpu") -> None:
        self.g = torch.Generator(device=device).manual_seed(seed)
        self.extra = torch.Generator(device=device).manual_seed(seed + 7919)
        self.realistic = variant.realistic
        self.std = std

    def weight(self, *shape: int, scale: float | None = None) -> torch.Tensor:
        """A linear layer's weight [out, in] (or any tensor): std `scale`, or 1/sqrt(fan-in) when realistic."""
        if self.realistic:
            scale = 1.0 / math.sqrt(shape[-1])
        return torch.randn(*shape, generator=self.g) * (self.std if scale is None else scale)

    def norm(self, n: int) -> torch.Tensor:
        """A norm's scale: ones, or log-normal around 1 (0.5 to 2 mostly) when realistic."""
        if not self.realistic:
            return torch.ones(n)
        return torch.exp(torch.randn(n, generator=self.extra) * 0.35)

    def bias(self, n: int) -> torch.Tensor:
        if not self.realistic:
            return torch.zeros(n)
        return torch.randn(n, generator=self.extra) * 0.2

    def uniform(self, n: int, low: float, high: float) -> torch.Tensor:
        if low == high:
            return torch.full((n,), low)
        return torch.empty(n).uniform_(low, high, generator=self.extra)


def language_model_tensors(
    config: dict[str, Any], seed: int, variant: Variant = VARIANTS["reference"], device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """Nemotron-H's tensors under the real checkpoint's names, from the config alone (made under `torch.device`)."""
    c = config["llm_config"]
    draw = _Draws(seed, variant, device=device)
    g = draw.g
    hidden, vocab = c["hidden_size"], c["vocab_size"]

    pre = "language_model.backbone."
    t: dict[str, torch.Tensor] = {
        pre + "embeddings.weight": draw.weight(vocab, hidden, scale=draw.std)
        if not variant.realistic
        else torch.randn(vocab, hidden, generator=g),
        pre + "norm_f.weight": draw.norm(hidden),
        "language_model.lm_head.weight": draw.weight(vocab, hidden),
    }
    layers = c["num_hidden_layers"]
    # GPT-2's scaling of the residual projections (rescale_prenorm_residual), as transformers initialises them.
    residual_scale = draw.std / math.sqrt(layers)
    dt_low, dt_high = variant.dt_range
    for i, kind in enumerate(c["hybrid_override_pattern"]):
        p = f"{pre}layers.{i}."
        t[p + "norm.weight"] = draw.norm(hidden)
        if kind == "M":
            heads, head_dim = c["mamba_num_heads"], c["mamba_head_dim"]
            inner = heads * head_dim
            groups_state = c["n_groups"] * c["ssm_state_size"]
            conv_dim = inner + 2 * groups_state
            projected = 2 * inner + 2 * groups_state + heads
            a = torch.empty(heads).uniform_(1.0, 16.0, generator=g)
            dt = torch.exp(torch.empty(heads).uniform_(math.log(dt_low), math.log(dt_high), generator=g))
            dt = dt.clamp(min=min(1e-4, dt_low))  # Mamba-2's init floor, or the variant's lower end
            bound = 1.0 / math.sqrt(c["conv_kernel"])  # PyTorch's default for a depthwise Conv1d
            t.update(
                {
                    p + "mixer.in_proj.weight": draw.weight(projected, hidden),
                    p + "mixer.conv1d.weight": torch.empty(conv_dim, 1, c["conv_kernel"]).uniform_(
                        -bound, bound, generator=g
                    ),
                    p + "mixer.conv1d.bias": torch.empty(conv_dim).uniform_(-bound, bound, generator=g),
                    p + "mixer.A_log": torch.log(a),
                    p + "mixer.dt_bias": dt + torch.log(-torch.expm1(-dt)),  # inverse of softplus
                    p + "mixer.D": draw.uniform(heads, *variant.d_range),
                    p + "mixer.norm.weight": draw.norm(inner),
                    p + "mixer.out_proj.weight": draw.weight(hidden, inner, scale=residual_scale),
                }
            )
            if c.get("use_bias"):
                t[p + "mixer.in_proj.bias"] = draw.bias(projected)
                t[p + "mixer.out_proj.bias"] = draw.bias(hidden)
        elif kind == "*":
            q = c["num_attention_heads"] * c["head_dim"]
            kv = c["num_key_value_heads"] * c["head_dim"]
            t.update(
                {
                    p + "mixer.q_proj.weight": draw.weight(q, hidden),
                    p + "mixer.k_proj.weight": draw.weight(kv, hidden),
                    p + "mixer.v_proj.weight": draw.weight(kv, hidden),
                    p + "mixer.o_proj.weight": draw.weight(hidden, q, scale=residual_scale),
                }
            )
        elif kind == "-":
            t.update(
                {
                    p + "mixer.up_proj.weight": draw.weight(c["intermediate_size"], hidden),
                    p + "mixer.down_proj.weight": draw.weight(hidden, c["intermediate_size"], scale=residual_scale),
                }
            )
            if c.get("mlp_bias"):
                t[p + "mixer.up_proj.bias"] = draw.bias(c["intermediate_size"])
                t[p + "mixer.down_proj.bias"] = draw.bias(hidden)
        else:
            raise ValueError(f"unknown Nemotron-H layer kind {kind!r} in {c['hybrid_override_pattern']!r}")
    return t


def vision_tensors(
    config: dict[str, Any], seed: int, variant: Variant = VARIANTS["reference"], device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """C-RADIO's ViT (timm names) and the projector, under the real checkpoint's names (made under `torch.device`)."""
    draw = _Draws(seed + 1, variant, device=device)
    vc = config["vision_config"]
    args = vc["args"]
    h, mlp, p = args["hidden_size"], args["intermediate_size"], vc["patch_size"]
    grid = round(args["cpe_max_size"] / p)
    register = args.get("register_multiple") or 0
    # The class tokens (one, or one per teacher), padded with registers up to the register multiple (C-RADIO's layout).
    cls = variant.cls_tokens
    cls_rows = math.ceil(cls / register) * register if register else cls

    pre = "vision_model.radio_model."
    t: dict[str, torch.Tensor] = {
        pre + "model.patch_generator.pos_embed": draw.weight(1, grid * grid, h, scale=h**-0.5),
        pre + "model.patch_generator.embedder.weight": draw.weight(h, 3 * p * p),
        pre + "model.patch_generator.cls_token.token": draw.weight(cls_rows, h),
        pre + "input_conditioner.norm_mean": torch.tensor(config["norm_mean"]).view(3, 1, 1),
        pre + "input_conditioner.norm_std": torch.tensor(config["norm_std"]).view(3, 1, 1),
    }
    for i in range(args["num_hidden_layers"]):
        b = f"{pre}model.blocks.{i}."
        t.update(
            {
                b + "norm1.weight": draw.norm(h),
                b + "norm1.bias": draw.bias(h),
                b + "attn.qkv.weight": draw.weight(3 * h, h),
                b + "attn.qkv.bias": draw.bias(3 * h),
                b + "attn.proj.weight": draw.weight(h, h),
                b + "attn.proj.bias": draw.bias(h),
                b + "norm2.weight": draw.norm(h),
                b + "norm2.bias": draw.bias(h),
                b + "mlp.fc1.weight": draw.weight(mlp, h),
                b + "mlp.fc1.bias": draw.bias(mlp),
                b + "mlp.fc2.weight": draw.weight(h, mlp),
                b + "mlp.fc2.bias": draw.bias(h),
            }
        )
    shuffle = round(1 / config["downsample_ratio"])
    vit_in = config["vit_hidden_size"] * shuffle * shuffle
    t.update(
        {
            "mlp1.0.weight": draw.norm(vit_in),  # RMSNorm over the pixel-shuffled ViT features
            "mlp1.1.weight": draw.weight(config["projector_hidden_size"], vit_in),
            "mlp1.3.weight": draw.weight(config["llm_config"]["hidden_size"], config["projector_hidden_size"]),
        }
    )
    return t


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="reference")
    ns = parser.parse_args()
    print(build_nemotron_tiny(ns.out, dtype=ns.dtype, seed=ns.seed, variant=ns.variant))
