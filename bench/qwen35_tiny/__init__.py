"""A tiny random-weight checkpoint in Qwen3.5 VL's real layout (`Qwen3_5ForConditionalGeneration`), never a real model.

H Company's Holo3.1 (0.8B, 4B, 9B) and Holo4 27B are fine-tunes of dense Qwen3.5 VL models (their
35B-A3B sizes are the `qwen3_5_moe` variant of the same design): a hybrid text model of Gated
DeltaNet layers and gated full attention (three linear layers to one attention layer), and a
Qwen3-VL-style ViT (16-px patches, 2 frames per temporal patch, 2x2 merge, no deepstack). This
builder writes a checkpoint that engines implementing the architecture themselves load as the real
one: vLLM's `qwen3_5` model (with the `qwen3_coder` tool parser and the `qwen3` reasoning parser)
and transformers' native `Qwen3_5ForConditionalGeneration`.

What is real:
- config.json: architecture, `model_type` qwen3_5 / qwen3_5_text, every key the real config has
  (`layer_types`, `full_attention_interval`, `attn_output_gate`, the linear-attention head counts,
  the interleaved M-RoPE over a quarter of each head, the vision tower's patch, merge and position
  grid, the four vision token ids) with tiny sizes.
- model.safetensors under the real tensor names (`model.language_model.*`, `model.visual.*`,
  `lm_head.weight`; the linear attention's separate `in_proj_qkv`, `in_proj_z`, `in_proj_b`,
  `in_proj_a`), written with torch and safetensors from the config alone. The norms are Qwen3.5's:
  zero-centred (`x * (1 + w)`) everywhere except the gated norm inside the linear attention.
- The special tokens (`<|im_start|>`, `<|im_end|>`, `<|vision_start|>`, `<|image_pad|>`,
  `<tool_call>`, `<think>`...), the ChatML turns, the image placeholder, thinking on by default,
  tool calls in the XML form the `qwen3_coder` parser reads.
- preprocessor_config.json / video_preprocessor_config.json: the Qwen2-VL image processor's real
  values (patch 16, temporal patch 2, merge 2, mean and std 0.5, the pixel budget).

What is made up:
- The sizes (hidden 64, 4 text layers, head dims 32 because vLLM's CPU attention needs 32 or more),
  the random weights (fan-in scaled, norms and biases drawn, GDN decays spread the Mamba-2 way so
  state carries across tokens), a 600-token byte-level BPE trained here on a few sentences, and the
  chat template: written for this project after the public Qwen3.5 format, not copied from it.
- No MTP head (`mtp.*`): H Company's checkpoints ship none either.

Variants: "reference" (dense, Holo3.1 0.8B-9B and Holo4 27B's `Qwen3_5ForConditionalGeneration`),
"moe" (`Qwen3_5MoeForConditionalGeneration`, the 35B-A3B sizes' layout: a router, per-expert
projections under `mlp.experts.N.*`, a shared expert and its gate), "scripted" (the reference
shapes made to say one reasoning sentence and one tool call, for the server's parsers),
"positional" (the reference shapes with position-sensitive attention, for engines' positions), and one that
is not tiny: "holo31-0.8b", Holo3.1-0.8B's real shapes with random weights, for measuring a step.

Deterministic: the same seed and dtype give the same bytes. The tiny variants build in about a second.
"""

from __future__ import annotations

import itertools
import math
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import torch

from bench.nemotron_tiny import write_json, write_weights
from bench.scripted_tokens import script_chain, train_tokenizer

Dtype = Literal["bfloat16", "float32"]

ARCHITECTURE = "Qwen3_5ForConditionalGeneration"
MOE_ARCHITECTURE = "Qwen3_5MoeForConditionalGeneration"  # Holo3, and Holo3.1 and Holo4's 35B-A3B
MARKER = "holodesk_qwen35_tiny"  # in config.json: this is a test checkpoint, never a real one

VOCAB_TARGET = 600
END_OF_TURN = "<|im_end|>"
IMAGE_PAD = "<|image_pad|>"
# Qwen's special tokens in their real order; the first group is "special" (never split from text and
# hidden from decoded output), the tool and reasoning tags are added tokens the parsers find by id.
CONTROL_TOKENS = (
    "<|endoftext|>",
    "<|im_start|>",
    END_OF_TURN,
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    IMAGE_PAD,
    "<|video_pad|>",
)
TAG_TOKENS = (
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
)

PATCH = 16
TEMPORAL_PATCH = 2
MERGE = 2
# The real image processor's pixel budget: at least 64k pixels, at most 16M (Qwen3.5's processor).
MIN_PIXELS = 65536
MAX_PIXELS = 16777216
IMAGE_MEAN = (0.5, 0.5, 0.5)
IMAGE_STD = (0.5, 0.5, 0.5)


@dataclass(frozen=True)
class Variant:
    """The shapes of one tiny checkpoint (the real 0.8B has hidden 1024, 24 layers, head_dim 256)."""

    name: str = "reference"
    hidden: int = 64
    layers: int = 4
    full_attention_interval: int = 4  # the real ratio: three Gated DeltaNet layers, then attention
    attention_heads: int = 2
    kv_heads: int = 1
    head_dim: int = 32
    mlp_hidden: int = 128
    linear_key_heads: int = 2
    linear_value_heads: int = 4
    linear_key_dim: int = 128  # the real size, and the only one vLLM's CPU chunked GDN kernel accepts
    linear_value_dim: int = 128
    conv_kernel: int = 4
    vit_hidden: int = 64
    vit_layers: int = 2
    vit_heads: int = 2
    vit_mlp: int = 128
    position_grid: int = 48  # the real 48x48 grid of learned positions, interpolated to the image
    tie_word_embeddings: bool = False
    # The embedding table's rows: 0 takes the trained tokenizer's size padded to 64 (every tiny
    # variant); a real-shaped variant names the real table's size, the rows past the tokenizer unused.
    vocab_size: int = 0
    # A scripted checkpoint answers every prompt with these pieces (see `scripted_answer`).
    script: tuple[str, ...] = ()
    # Mixture of experts (qwen3_5_moe; the real 35B-A3B: 256 experts, 8 a token, 512 wide, one shared
    # expert of 512): 0 for the dense model.
    experts: int = 0
    experts_per_token: int = 2
    expert_hidden: int = 64
    shared_expert_hidden: int = 64
    # The text model's rotary base (the real 10,000,000 by default).
    rope_theta: int = 10000000
    # Added to the attention's q_norm and k_norm weights (applied as 1 + w): sharper attention.
    qk_norm_shift: float = 0.0
    # The output head's scale. At 1 (fan-in scaled) the logits spread about 1 nat and the best token
    # leads the next by a median 0.2-0.3: nearly flat, so rounding decides many steps. A real model's
    # best token usually leads by more (tests/inference/engine/test_qwen35_against_vllm.py). Untied heads only.
    logit_gain: float = 1.0


# What the scripted variant says after the generation prompt's "<think>\n": a reasoning sentence, the
# end of reasoning, then one tool call in the XML form Qwen3.5 is trained on, then the end of turn.
SCRIPT = (
    "The inbox is on the left.",
    "</think>",
    "\n\n",
    "<tool_call>",
    "\n<function=click_desktop>\n",
    "<parameter=x>\n",
    "120",
    "\n</parameter>\n",
    "<parameter=y>\n",
    "340",
    "\n</parameter>\n</function>\n",
    "</tool_call>",
    END_OF_TURN,
)

VARIANTS: dict[str, Variant] = {
    "reference": Variant(),
    # The same shapes, but a model that says SCRIPT whatever it is shown: every layer's output
    # projection is zero, so the last position's residual is its own token's embedding, and the
    # output head maps each piece to the next (a bigram chain; every piece is one token, used once).
    # What it is for: the server's tool and reasoning parsers on real generated tokens.
    "scripted": Variant(name="scripted", script=SCRIPT),
    # The same attention and vision, with every MLP a routed mixture (8 experts, 2 a token) plus the
    # gated shared expert.
    "moe": Variant(name="moe", experts=8),
    # The reference shapes with attention that depends on position: q_norm and k_norm scaled up
    # (about 3x each, so the scores 9x: attention picks few keys) and a rotary base of 10,000 where
    # the real one is 10,000,000 (every rotary pair of these 8 dims turns within a prompt). On the
    # reference checkpoint attention over thousands of keys is close to an average, and decoding at
    # positions off by the image's M-RoPE offset changes no token; here it changes them from the third.
    "positional": Variant(name="positional", rope_theta=10000, qk_norm_shift=2.0),
    # Not tiny: Holo3.1-0.8B's real shapes (Qwen3.5-0.8B's public config: 24 layers of 1024, FFN 3584,
    # 8 query and 2 key-value heads of 256, 16 + 16 Gated DeltaNet heads of 128, tied embeddings over
    # 248,320 rows; a ViT of 12 blocks of 768, 12 heads, MLP 3072), random weights, 0.85 B parameters
    # (1.7 GB in bfloat16, about 15 s to build). The M-RoPE split is the builder's ([12, 10, 10] where
    # the real one is [11, 11, 10]: the same work) and the tokenizer the tiny one. For
    # bench/holo31_cpu_step.py: compute and memory as the real model's, answers meaningless.
    "holo31-0.8b": Variant(
        name="holo31-0.8b",
        hidden=1024,
        layers=24,
        attention_heads=8,
        kv_heads=2,
        head_dim=256,
        mlp_hidden=3584,
        linear_key_heads=16,
        linear_value_heads=16,
        vit_hidden=768,
        vit_layers=12,
        vit_heads=12,
        vit_mlp=3072,
        tie_word_embeddings=True,
        vocab_size=248320,
    ),
}

# --- chat template ------------------------------------------------------------------------------
# After Qwen3.5's public format (written here, not copied): ChatML turns; tools described in the
# system turn as XML and called as <tool_call><function=NAME><parameter=KEY>VALUE</parameter>...,
# which vLLM's qwen3_coder parser reads; tool results as user turns in <tool_response>; an image part
# (OpenAI "image_url" or plain "image") as <|vision_start|><|image_pad|><|vision_end|>, which the
# processor expands; reasoning on by default (the generation prompt opens <think>), off with
# enable_thinking=false; past reasoning is dropped from assistant turns.
CHAT_TEMPLATE = (
    "{%- macro render(content) -%}"
    "{%- if content is string -%}{{ content }}"
    "{%- elif content is none -%}"
    "{%- else -%}{%- for part in content -%}"
    "{%- if part['type'] in ('image', 'image_url') -%}<|vision_start|><|image_pad|><|vision_end|>"
    "{%- elif part['type'] in ('video', 'video_url') -%}<|vision_start|><|video_pad|><|vision_end|>"
    "{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- macro value(v) -%}"
    "{%- if v is string -%}{{ v }}{%- else -%}{{ v | tojson }}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- set ns = namespace(system='') -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set ns.system = render(messages[0]['content']) -%}{%- set messages = messages[1:] -%}"
    "{%- endif -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n# Tools\\n\\nYou have access to the following functions:\\n\\n<tools>' -}}"
    "{%- for tool in tools -%}"
    "{%- set fn = tool['function'] if tool['function'] else tool -%}"
    "{{- '\\n<function>\\n<name>' + fn['name'] + '</name>' -}}"
    "{%- if fn['description'] -%}{{- '\\n<description>' + fn['description'] + '</description>' -}}"
    "{%- endif -%}"
    "{{- '\\n<parameters>' -}}"
    "{%- set params = fn['parameters'] or {} -%}"
    "{%- for pname, pspec in (params['properties'] or {}) | dictsort -%}"
    "{{- '\\n<parameter>\\n<name>' + pname + '</name>' -}}"
    "{%- if pspec['type'] -%}{{- '\\n<type>' + value(pspec['type']) + '</type>' -}}{%- endif -%}"
    "{%- if pspec['description'] -%}"
    "{{- '\\n<description>' + pspec['description'] + '</description>' -}}{%- endif -%}"
    "{{- '\\n</parameter>' -}}"
    "{%- endfor -%}"
    "{%- if params['required'] -%}{{- '\\n<required>' + (params['required'] | tojson) + '</required>' -}}"
    "{%- endif -%}"
    "{{- '\\n</parameters>\\n</function>' -}}"
    "{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call a function, reply with:\\n<tool_call>\\n<function=NAME>\\n"
    "<parameter=KEY>\\nVALUE\\n</parameter>\\n</function>\\n</tool_call>' -}}"
    "{%- if ns.system -%}{{- '\\n\\n' + ns.system -}}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif ns.system -%}"
    "{{- '<|im_start|>system\\n' + ns.system + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in messages -%}"
    "{%- set text = render(message['content']) -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{- '<|im_start|>user\\n' + text + '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{%- if '</think>' in text -%}{%- set text = text.split('</think>')[-1].lstrip('\\n') -%}{%- endif -%}"
    "{{- '<|im_start|>assistant\\n' + text -}}"
    "{%- for call in (message['tool_calls'] or []) -%}"
    "{%- set fn = call['function'] if call['function'] else call -%}"
    "{%- if loop.first and text -%}{{- '\\n\\n' -}}{%- elif not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n<function=' + fn['name'] + '>\\n' -}}"
    "{%- if fn['arguments'] is mapping -%}"
    "{%- for k, v in fn['arguments'] | dictsort -%}"
    "{{- '<parameter=' + k + '>\\n' + value(v) + '\\n</parameter>\\n' -}}"
    "{%- endfor -%}"
    "{%- elif fn['arguments'] -%}{{- fn['arguments'] + '\\n' -}}"  # arguments left as a JSON string
    "{%- endif -%}"
    "{{- '</function>\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- elif message['role'] == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + text + '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}{{- '<think>\\n' -}}{%- endif -%}"
    "{%- endif -%}"
)

_CORPUS = (
    "You are a computer-use agent. Look at the screenshot and call one tool.",
    "<tool_call>\n<function=click_desktop>\n<parameter=element>\nInbox\n</parameter>\n<parameter=x>\n120\n"
    "</parameter>\n<parameter=y>\n340\n</parameter>\n</function>\n</tool_call>",
    "<think>\nThe inbox is on the left, so I click it.\n</think>\n\n",
    '{"note": null, "thought": "click the inbox", "tool_call": {"tool_name": "click_desktop", "x": 120, "y": 340}}',
    "# Tools\n\nYou have access to the following functions:\n\n<tools>\n<function>\n<name>write_desktop</name>\n"
    "<description>Type text</description>\n<parameters>\n<parameter>\n<name>content</name>\n<type>string</type>",
    "scroll_desktop direction down up left right wait_desktop answer update_plan goals title status hotkey keys",
    "Open the settings window, find the display section and set the scale to 150 percent.",
    "0 1 2 3 4 5 6 7 8 9 10 100 250 500 750 999 1000 x y element content direction seconds",
)


def build_qwen35_tiny(
    directory: Path, *, dtype: Dtype = "bfloat16", seed: int = 0, variant: Variant | str = "reference"
) -> Path:
    """Write the checkpoint into `directory` (created; replaced if it exists) and return it."""
    shape = VARIANTS[variant] if isinstance(variant, str) else variant
    out = Path(directory)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    tokenizer = train_tokenizer(_CORPUS, VOCAB_TARGET, CONTROL_TOKENS, TAG_TOKENS, shape.script)
    ids = {token: tokenizer.token_to_id(token) for token in (*CONTROL_TOKENS, *TAG_TOKENS)}
    vocab_size = shape.vocab_size or math.ceil(tokenizer.get_vocab_size() / 64) * 64  # padded like the real table
    config = _config(ids, vocab_size, dtype, shape)
    write_json(out / "config.json", config)
    write_json(
        out / "generation_config.json",
        {"eos_token_id": [ids[END_OF_TURN], ids["<|endoftext|>"]], "pad_token_id": ids["<|endoftext|>"]},
    )
    image = {
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL_PATCH,
        "merge_size": MERGE,
        "image_mean": list(IMAGE_MEAN),
        "image_std": list(IMAGE_STD),
        "size": {"shortest_edge": MIN_PIXELS, "longest_edge": MAX_PIXELS},
    }
    write_json(
        out / "preprocessor_config.json",
        {**image, "image_processor_type": "Qwen2VLImageProcessor", "processor_class": "Qwen3VLProcessor"},
    )
    write_json(
        out / "video_preprocessor_config.json",
        {**image, "video_processor_type": "Qwen3VLVideoProcessor", "processor_class": "Qwen3VLProcessor"},
    )
    tokenizer.save(str(out / "tokenizer.json"))
    # Every added token is listed in tokenizer_config.json: transformers rebuilds the added vocabulary from it.
    added = {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items()}
    write_json(out / "tokenizer_config.json", _tokenizer_config(added))
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    tensors = {**text_tensors(config, seed, shape), **vision_tensors(config, seed, shape)}
    if shape.script:
        chain = script_chain(tokenizer, shape.script, (*CONTROL_TOKENS, *TAG_TOKENS))
        tensors.update(_scripted(config, tensors, chain))
    write_weights(out, tensors, dtype)
    return out


# --- tokenizer ----------------------------------------------------------------------------------


def _tokenizer_config(added: dict[str, int]) -> dict[str, Any]:
    return {
        "tokenizer_class": "Qwen2Tokenizer",
        "eos_token": END_OF_TURN,
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "bos_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "errors": "replace",
        "split_special_tokens": False,
        "model_max_length": 262144,
        "image_token": IMAGE_PAD,
        "video_token": "<|video_pad|>",
        "vision_start_token": "<|vision_start|>",
        "vision_end_token": "<|vision_end|>",
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
    layer_types = [
        "linear_attention" if (i + 1) % v.full_attention_interval else "full_attention" for i in range(v.layers)
    ]
    rotary_half = int(v.head_dim * 0.25) // 2  # M-RoPE over a quarter of each head, split t/h/w
    mlp: dict[str, Any] = {"intermediate_size": v.mlp_hidden}
    if v.experts:
        mlp = {
            "num_experts": v.experts,
            "num_experts_per_tok": v.experts_per_token,
            "moe_intermediate_size": v.expert_hidden,
            "shared_expert_intermediate_size": v.shared_expert_hidden,
            "router_aux_loss_coef": 0.001,
            "output_router_logits": False,
        }
    family = "qwen3_5_moe" if v.experts else "qwen3_5"
    text = {
        "model_type": family + "_text",
        "vocab_size": vocab_size,
        "hidden_size": v.hidden,
        **mlp,
        "num_hidden_layers": v.layers,
        "layer_types": layer_types,
        "full_attention_interval": v.full_attention_interval,
        "num_attention_heads": v.attention_heads,
        "num_key_value_heads": v.kv_heads,
        "head_dim": v.head_dim,
        "attn_output_gate": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "linear_conv_kernel_dim": v.conv_kernel,
        "linear_key_head_dim": v.linear_key_dim,
        "linear_value_head_dim": v.linear_value_dim,
        "linear_num_key_heads": v.linear_key_heads,
        "linear_num_value_heads": v.linear_value_heads,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 262144,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": v.rope_theta,
            "partial_rotary_factor": 0.25,
            "mrope_interleaved": True,
            "mrope_section": [rotary_half - 2 * (rotary_half // 3), rotary_half // 3, rotary_half // 3],
        },
        "initializer_range": 0.02,
        "use_cache": True,
        "tie_word_embeddings": v.tie_word_embeddings,
        "eos_token_id": ids[END_OF_TURN],
        "pad_token_id": None,
        "bos_token_id": None,
        "dtype": dtype,
    }
    vision = {
        "model_type": family,
        "depth": v.vit_layers,
        "hidden_size": v.vit_hidden,
        "intermediate_size": v.vit_mlp,
        "num_heads": v.vit_heads,
        "hidden_act": "gelu_pytorch_tanh",
        "in_channels": 3,
        "patch_size": PATCH,
        "temporal_patch_size": TEMPORAL_PATCH,
        "spatial_merge_size": MERGE,
        "out_hidden_size": v.hidden,
        "num_position_embeddings": v.position_grid**2,
        "deepstack_visual_indexes": [],
        "initializer_range": 0.02,
    }
    return {
        "architectures": [MOE_ARCHITECTURE if v.experts else ARCHITECTURE],
        "model_type": family,
        "text_config": text,
        "vision_config": vision,
        "image_token_id": ids[IMAGE_PAD],
        "video_token_id": ids["<|video_pad|>"],
        "vision_start_token_id": ids["<|vision_start|>"],
        "vision_end_token_id": ids["<|vision_end|>"],
        "tie_word_embeddings": v.tie_word_embeddings,
        "dtype": dtype,
        MARKER: True,
    }


# --- weights ------------------------------------------------------------------------------------


class _Draws:
    """Random tensors with realistic statistics: weights scaled to fan-in, norms and biases drawn."""

    def __init__(self, seed: int) -> None:
        self.g = torch.Generator().manual_seed(seed)

    def weight(self, *shape: int, gain: float = 1.0) -> torch.Tensor:
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
        return torch.randn(*shape, generator=self.g) * (gain / math.sqrt(fan_in))

    def centred_norm(self, n: int) -> torch.Tensor:
        """A zero-centred norm's weight (applied as 1 + w): around 0, so scales of about 0.6 to 1.4."""
        return torch.randn(n, generator=self.g) * 0.2

    def norm(self, n: int) -> torch.Tensor:
        """A plain norm's scale: log-normal around 1."""
        return torch.exp(torch.randn(n, generator=self.g) * 0.3)

    def bias(self, n: int) -> torch.Tensor:
        return torch.randn(n, generator=self.g) * 0.1

    def uniform(self, *shape: int, low: float, high: float) -> torch.Tensor:
        return torch.empty(*shape).uniform_(low, high, generator=self.g)


def text_tensors(config: dict[str, Any], seed: int, v: Variant = VARIANTS["reference"]) -> dict[str, torch.Tensor]:
    """The language model's tensors under the real checkpoint's names, from the config alone."""
    c = config["text_config"]
    draw = _Draws(seed)
    hidden, vocab = c["hidden_size"], c["vocab_size"]
    pre = "model.language_model."
    t: dict[str, torch.Tensor] = {
        pre + "embed_tokens.weight": torch.randn(vocab, hidden, generator=draw.g),
        pre + "norm.weight": draw.centred_norm(hidden),
    }
    if not c["tie_word_embeddings"]:
        t["lm_head.weight"] = draw.weight(vocab, hidden, gain=v.logit_gain)
    residual_gain = 1.0 / math.sqrt(2 * c["num_hidden_layers"])  # keep the residual stream from growing
    for i, kind in enumerate(c["layer_types"]):
        p = f"{pre}layers.{i}."
        t[p + "input_layernorm.weight"] = draw.centred_norm(hidden)
        t[p + "post_attention_layernorm.weight"] = draw.centred_norm(hidden)
        if "num_experts" in c:
            t.update(_moe_tensors(c, draw, p + "mlp.", residual_gain))
        else:
            t[p + "mlp.gate_proj.weight"] = draw.weight(c["intermediate_size"], hidden)
            t[p + "mlp.up_proj.weight"] = draw.weight(c["intermediate_size"], hidden)
            t[p + "mlp.down_proj.weight"] = draw.weight(hidden, c["intermediate_size"], gain=residual_gain)
        if kind == "linear_attention":
            key_heads, value_heads = c["linear_num_key_heads"], c["linear_num_value_heads"]
            key_dim = key_heads * c["linear_key_head_dim"]
            value_dim = value_heads * c["linear_value_head_dim"]
            conv_dim = 2 * key_dim + value_dim
            kernel = c["linear_conv_kernel_dim"]
            # Decay rates like Mamba-2's: A in [1, 16], dt log-uniform in [1e-3, 1e-1], so some heads
            # keep their state across many tokens and a broken recurrent cache shows.
            dt = torch.exp(draw.uniform(value_heads, low=math.log(1e-3), high=math.log(1e-1)))
            bound = 1.0 / math.sqrt(kernel)
            t.update(
                {
                    p + "linear_attn.in_proj_qkv.weight": draw.weight(conv_dim, hidden),
                    p + "linear_attn.in_proj_z.weight": draw.weight(value_dim, hidden),
                    p + "linear_attn.in_proj_b.weight": draw.weight(value_heads, hidden),
                    p + "linear_attn.in_proj_a.weight": draw.weight(value_heads, hidden),
                    p + "linear_attn.conv1d.weight": draw.uniform(conv_dim, 1, kernel, low=-bound, high=bound),
                    p + "linear_attn.A_log": torch.log(draw.uniform(value_heads, low=1.0, high=16.0)),
                    p + "linear_attn.dt_bias": dt + torch.log(-torch.expm1(-dt)),  # inverse of softplus
                    p + "linear_attn.norm.weight": draw.norm(c["linear_value_head_dim"]),
                    p + "linear_attn.out_proj.weight": draw.weight(hidden, value_dim, gain=residual_gain),
                }
            )
        elif kind == "full_attention":
            heads, kv, head_dim = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
            t.update(
                {
                    # Twice the query width: queries and the output gate (attn_output_gate).
                    p + "self_attn.q_proj.weight": draw.weight(2 * heads * head_dim, hidden),
                    p + "self_attn.k_proj.weight": draw.weight(kv * head_dim, hidden),
                    p + "self_attn.v_proj.weight": draw.weight(kv * head_dim, hidden),
                    p + "self_attn.o_proj.weight": draw.weight(hidden, heads * head_dim, gain=residual_gain),
                    p + "self_attn.q_norm.weight": draw.centred_norm(head_dim) + v.qk_norm_shift,
                    p + "self_attn.k_norm.weight": draw.centred_norm(head_dim) + v.qk_norm_shift,
                }
            )
        else:
            raise ValueError(f"unknown Qwen3.5 layer type {kind!r}")
    return t


def _moe_tensors(c: dict[str, Any], draw: _Draws, p: str, residual_gain: float) -> dict[str, torch.Tensor]:
    """A routed mixture under the real names: router, each expert's projections, the shared expert and its gate."""
    hidden, width, shared = c["hidden_size"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    # Router scores spread wide (gain 3) so that the top experts rarely tie: bfloat16 rounding then
    # does not change which experts a token goes to.
    t = {p + "gate.weight": draw.weight(c["num_experts"], hidden, gain=3.0)}
    for e in range(c["num_experts"]):
        t[f"{p}experts.{e}.gate_proj.weight"] = draw.weight(width, hidden)
        t[f"{p}experts.{e}.up_proj.weight"] = draw.weight(width, hidden)
        t[f"{p}experts.{e}.down_proj.weight"] = draw.weight(hidden, width, gain=residual_gain)
    t[p + "shared_expert.gate_proj.weight"] = draw.weight(shared, hidden)
    t[p + "shared_expert.up_proj.weight"] = draw.weight(shared, hidden)
    t[p + "shared_expert.down_proj.weight"] = draw.weight(hidden, shared, gain=residual_gain)
    t[p + "shared_expert_gate.weight"] = draw.weight(1, hidden)
    return t


def vision_tensors(config: dict[str, Any], seed: int, v: Variant = VARIANTS["reference"]) -> dict[str, torch.Tensor]:
    """The Qwen3-VL-style ViT and its patch merger, under the real checkpoint's names."""
    vc = config["vision_config"]
    draw = _Draws(seed + 1)
    h, mlp, p = vc["hidden_size"], vc["intermediate_size"], vc["patch_size"]
    merged = h * vc["spatial_merge_size"] ** 2
    pre = "model.visual."
    t: dict[str, torch.Tensor] = {
        pre + "patch_embed.proj.weight": draw.weight(h, vc["in_channels"], vc["temporal_patch_size"], p, p),
        pre + "patch_embed.proj.bias": draw.bias(h),
        pre + "pos_embed.weight": torch.randn(vc["num_position_embeddings"], h, generator=draw.g) * 0.5,
        pre + "merger.norm.weight": draw.norm(h),
        pre + "merger.norm.bias": draw.bias(h),
        pre + "merger.linear_fc1.weight": draw.weight(merged, merged),
        pre + "merger.linear_fc1.bias": draw.bias(merged),
        pre + "merger.linear_fc2.weight": draw.weight(vc["out_hidden_size"], merged),
        pre + "merger.linear_fc2.bias": draw.bias(vc["out_hidden_size"]),
    }
    for i in range(vc["depth"]):
        b = f"{pre}blocks.{i}."
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
                b + "mlp.linear_fc1.weight": draw.weight(mlp, h),
                b + "mlp.linear_fc1.bias": draw.bias(mlp),
                b + "mlp.linear_fc2.weight": draw.weight(h, mlp),
                b + "mlp.linear_fc2.bias": draw.bias(h),
            }
        )
    return t


def _scripted(config: dict[str, Any], tensors: dict[str, torch.Tensor], chain: list[int]) -> dict[str, torch.Tensor]:
    """The replacements that make the model say the chain: no layer writes to the residual, a plain
    final norm, and an output head whose row for each next token is the previous token's direction."""
    c = config["text_config"]
    zero_outputs = (".linear_attn.out_proj.weight", ".self_attn.o_proj.weight", ".mlp.down_proj.weight")
    out = {name: torch.zeros_like(t) for name, t in tensors.items() if name.endswith(zero_outputs)}
    out["model.language_model.norm.weight"] = torch.zeros(c["hidden_size"])  # applied as 1 + w
    embed = tensors["model.language_model.embed_tokens.weight"]
    head = torch.zeros(c["vocab_size"], c["hidden_size"])
    for previous, following in itertools.pairwise(chain):
        direction = embed[previous] / embed[previous].norm()
        head[following] += 4.0 * direction  # logit about 4 * sqrt(hidden) = 32; other rows meet noise of about 4
    out["lm_head.weight"] = head
    return out


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="reference")
    ns = parser.parse_args()
    print(build_qwen35_tiny(ns.out, dtype=ns.dtype, seed=ns.seed, variant=ns.variant))
