"""Build the tiny random-weight VLM checkpoint, offline, in well under a second.

The checkpoint is a directory like a Hugging Face snapshot of Holotron-12B: config.json with an
auto_map to python files shipped beside it, safetensors weights, a fast tokenizer with a ChatML
chat template, and processor/image-processor configs with their own auto_map. So it loads through
the same `trust_remote_code=True` path (`AutoModelForCausalLM` + `AutoProcessor`) as the real one.
"""

from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path
from typing import Any

REMOTE_CODE = Path(__file__).with_name("remote")
REMOTE_FILES = (
    "configuration_tiny_vlm.py",
    "modeling_tiny_vlm.py",
    "image_processing_tiny_vlm.py",
    "processing_tiny_vlm.py",
)

IMAGE_TOKENS_PER_TILE = 256  # (512 / 16)^2 patches, pixel shuffle 0.5
SPECIAL_TOKENS = ("<pad>", "<|im_start|>", "<|im_end|>", "<image>", "<img>", "</img>", "<think>", "</think>")

# ChatML, as Nemotron-Nano-VL: an image part renders as the <image> tag the processor expands.
# `enable_thinking=False` pre-fills an empty reasoning block, the way the profile asks for no reasoning.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "<|im_start|>{{ message['role'] }}{{ '\\n' }}"
    "{%- if message['content'] is string -%}{{ message['content'] }}"
    "{%- else -%}{%- for part in message['content'] -%}"
    "{%- if part['type'] == 'image' -%}<image>{%- elif part['type'] == 'text' -%}{{ part['text'] }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "<|im_end|>{{ '\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_start|>assistant{{ '\\n' }}"
    "{%- if enable_thinking is defined and not enable_thinking -%}<think></think>{%- endif -%}"
    "{%- endif -%}"
)

_CORPUS = [
    "You are a computer-use agent. Look at the screenshot and answer with one JSON action.",
    'Task: archive every unread newsletter in my mail. {"note": "", "thought": "click the inbox", '
    '"action": {"action": "click_element", "element": "Inbox", "x": 120, "y": 340}}',
    '{"name": "click_desktop", "arguments": {"x": 512, "y": 87}} {"name": "write_desktop", "arguments": '
    '{"text": "hello world"}} {"name": "hotkey_desktop", "arguments": {"keys": ["ctrl", "s"]}}',
    "scroll down up left right go_back refresh wait answer write_element double_click drag_to move_to",
    "Open the settings window, find the display section and set the scale to 150 percent.",
    "Previous steps: 1. clicked the search field 2. typed the query 3. pressed Enter",
    "0 1 2 3 4 5 6 7 8 9 10 100 250 500 750 999 1000 x y element content direction seconds",
]


def _train_tokenizer() -> Any:
    """A byte-level BPE of a few hundred tokens, trained on agent-like text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|im_end|>",
        pad_token="<pad>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<pad>", "<|im_end|>")],
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _text_config(tokenizer: Any) -> dict[str, Any]:
    """Bamba with layers M*M* (Mamba, attention, Mamba, attention), hidden 64: a miniature Nemotron-H."""
    return {
        "model_type": "bamba",
        "vocab_size": len(tokenizer),
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "attn_layer_indices": [1, 3],
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "mamba_n_heads": 8,
        "mamba_d_head": 16,
        "mamba_n_groups": 1,
        "mamba_d_state": 16,
        "mamba_d_conv": 4,
        "mamba_expand": 2,
        "mamba_chunk_size": 64,
        "max_position_embeddings": 16384,
        "pad_token_id": tokenizer.pad_token_id,
        "bos_token_id": tokenizer.convert_tokens_to_ids("<|im_start|>"),
        "eos_token_id": tokenizer.eos_token_id,
        "tie_word_embeddings": False,
    }


def _reinit_mamba_decay(model: Any, generator: Any) -> None:
    """Mamba-2's own init: A in [1, 16] and dt log-uniform in [1e-3, 1e-1] through softplus.

    Bamba's `_init_weights` sets dt_bias to 1 (dt ~ 1.3), so the state forgets almost at once and
    a broken cache would go unnoticed; with Mamba-2's init the state carries across tokens.
    """
    import torch

    for module in model.modules():
        if hasattr(module, "A_log") and hasattr(module, "dt_bias"):
            heads = module.A_log.shape[0]
            a = torch.empty(heads).uniform_(1.0, 16.0, generator=generator)
            dt = torch.exp(torch.empty(heads).uniform_(math.log(1e-3), math.log(1e-1), generator=generator)).clamp(
                min=1e-4
            )
            with torch.no_grad():
                module.A_log.copy_(torch.log(a))
                module.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # inverse of softplus


def build_tiny_checkpoint(directory: Path, *, seed: int = 0) -> Path:
    """Write a new tiny checkpoint in a uniquely named folder under `directory`; return that folder.

    The folder name is unique because transformers imports remote code as a module named after the
    checkpoint folder: two builds with the same name in one process would share stale classes.
    """
    import torch
    from transformers import PreTrainedTokenizerFast

    from holodesk.inference.standin.remote.configuration_tiny_vlm import TinyVLMConfig
    from holodesk.inference.standin.remote.image_processing_tiny_vlm import TinyVLMImageProcessor
    from holodesk.inference.standin.remote.modeling_tiny_vlm import TinyVLMForCausalLM

    path = Path(directory) / f"tiny_vlm_{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)

    tokenizer: PreTrainedTokenizerFast = _train_tokenizer()
    config = TinyVLMConfig(
        text_config=_text_config(tokenizer),
        image_context_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        torch_dtype="float32",
    )
    config.auto_map = {
        "AutoConfig": "configuration_tiny_vlm.TinyVLMConfig",
        "AutoModel": "modeling_tiny_vlm.TinyVLMForCausalLM",
        "AutoModelForCausalLM": "modeling_tiny_vlm.TinyVLMForCausalLM",
    }
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyVLMForCausalLM(config)
    _reinit_mamba_decay(model, generator)
    model.save_pretrained(path, safe_serialization=True)

    for name in REMOTE_FILES:
        shutil.copyfile(REMOTE_CODE / name, path / name)
    tokenizer.save_pretrained(path)
    processor_auto_map = {
        "AutoImageProcessor": "image_processing_tiny_vlm.TinyVLMImageProcessor",
        "AutoProcessor": "processing_tiny_vlm.TinyVLMProcessor",
    }
    image_processor = TinyVLMImageProcessor(image_size=config.image_size, patch_size=config.patch_size)
    preprocessor = image_processor.to_dict()
    preprocessor.update(
        image_processor_type="TinyVLMImageProcessor", processor_class="TinyVLMProcessor", auto_map=processor_auto_map
    )
    _write_json(path / "preprocessor_config.json", preprocessor)
    _write_json(
        path / "processor_config.json",
        {"processor_class": "TinyVLMProcessor", "auto_map": {"AutoProcessor": processor_auto_map["AutoProcessor"]}},
    )
    (path / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    return path


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
