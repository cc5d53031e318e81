"""Build the tiny random-weight VLM checkpoint, offline, in well under a second.

The checkpoint is a directory like a Hugging Face snapshot of Holotron-12B: config.json (architecture
`NemotronH_Nano_VL_V2`, bf16, `flash_attention_2` by default) with an auto_map to the python files shipped
beside it under the real checkpoint's file names, bf16 safetensors weights, a generation config whose
end tokens include `<SPECIAL_12>`, a fast tokenizer with Nemotron-Nano-v2's chat template, and
processor/image-processor configs with their own auto_map. It fails where the real one fails (see
the remote files' docstrings) and loads through the same `trust_remote_code=True` path.

Its random weights answer noise. Built with `answer="..."`, the whole answer text is one more token of
its vocabulary and the weights are set (chosen_answer.teach_answer) so that greedy decoding after the
chat template's generation prompt writes exactly that answer, then the end-of-turn token.
"""

from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path
from typing import Any

REMOTE_CODE = Path(__file__).with_name("remote")
# The real checkpoint's file names: transformers imports them as modules of those names.
REMOTE_FILES = (
    "configuration.py",
    "configuration_nemotron_h.py",
    "modeling.py",
    "modeling_nemotron_h.py",
    "image_processing.py",
    "processing.py",
)
ARCHITECTURE = "NemotronH_Nano_VL_V2"
# config.json marks the stand-in: the loader lets this one, and only this one, run on the CPU.
STANDIN_MARKER = "holodesk_standin"

IMAGE_TOKENS_PER_TILE = 256  # (512 / 16)^2 patches, pixel shuffle 0.5
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

_CORPUS = [
    "You are a computer-use agent. Look at the screenshot and answer with one JSON object. /no_think",
    'Task: archive every unread newsletter in my mail. {"note": null, "thought": "click the inbox", '
    '"tool_call": {"tool_name": "click_desktop", "element": "Inbox", "x": 120, "y": 340}}',
    '{"tool_name": "write_desktop", "content": "hello world", "press_enter": true, "overwrite": false}'
    ' {"tool_name": "hotkey_desktop", "keys": ["ctrl", "s"], "repeat_count": 1}',
    "scroll_desktop direction down up left right scroll_size wait_desktop answer update_plan goals title status",
    "Open the settings window, find the display section and set the scale to 150 percent.",
    "System User Assistant Previous steps: 1. clicked the search field 2. typed the query 3. pressed Enter",
    "0 1 2 3 4 5 6 7 8 9 10 100 250 500 750 999 1000 x y element content direction seconds",
]


def _train_tokenizer() -> Any:
    """A byte-level BPE of a few hundred tokens, trained on agent-like text, with Nemotron's special tokens."""
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
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<unk>", "<s>", "</s>")],
    )
    tokenizer.chat_template = CHAT_TEMPLATE  # type: ignore[attr-defined]
    return tokenizer


def _text_config(tokenizer: Any) -> dict[str, Any]:
    """Bamba with layers M*M* (Mamba, attention, Mamba, attention), hidden 64: a miniature Nemotron-H."""
    return {
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
        "pad_token_id": tokenizer.convert_tokens_to_ids("<unk>"),
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.convert_tokens_to_ids(END_OF_TURN),
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
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


def _import_remote(path: Path) -> tuple[Any, Any]:
    """The config and model classes from the files just copied into `path`, as trust_remote_code imports them."""
    from transformers.dynamic_module_utils import get_class_from_dynamic_module

    config_class = get_class_from_dynamic_module("configuration.NemotronH_Nano_VL_V2_Config", str(path))
    model_class = get_class_from_dynamic_module("modeling.NemotronH_Nano_VL_V2", str(path))
    return config_class, model_class


def generation_prompt_ends(tokenizer: Any) -> list[int]:
    """The last token of the chat template's generation prompt, with reasoning off and on."""
    ends = []
    for flag in ("/no_think", "/think"):
        ids = tokenizer.apply_chat_template(
            [{"role": "system", "content": flag}, {"role": "user", "content": "?"}],
            add_generation_prompt=True,
            tokenize=True,
        )
        ends.append(int(ids[-1]))
    return sorted(set(ends))


def build_tiny_checkpoint(directory: Path, *, seed: int = 0, answer: str | None = None) -> Path:
    """Write a new tiny checkpoint in a uniquely named folder under `directory`; return that folder.

    With `answer`, greedy decoding writes that text as the whole answer to any prompt (see the module
    docstring); it must not be empty or contain the tokenizer's special tokens.

    The folder name is unique because transformers imports remote code as a module named after the
    checkpoint folder: two builds with the same name in one process would share stale classes.
    Building imports the checkpoint's own modeling files, so mamba-ssm (or the tests' stand-in for
    it) must be importable, as it must be to load the checkpoint.
    """
    import torch
    from transformers import GenerationConfig

    from holodesk.inference.standin.chosen_answer import teach_answer

    path = Path(directory) / f"tiny_vlm_{uuid.uuid4().hex[:12]}"
    path.mkdir(parents=True)
    for name in REMOTE_FILES:
        shutil.copyfile(REMOTE_CODE / name, path / name)

    tokenizer = _train_tokenizer()
    if answer is not None:
        if not answer.strip() or any(special in answer for special in SPECIAL_TOKENS):
            raise ValueError(f"the chosen answer must be plain, non-empty text, got {answer!r}")
        tokenizer.add_tokens([answer])
    config_class, model_class = _import_remote(path)
    # attn_implementation is left at the file's default (flash_attention_2), as in the real config.json;
    # the weights are built with sdpa since flash-attn is not needed to write them.
    config = config_class(
        text_config=_text_config(tokenizer),
        vision_config={"image_size": 512, "patch_size": 16, "hidden_size": 32, "num_heads": 2},
        img_context_token_id=tokenizer.convert_tokens_to_ids("<image>"),
        torch_dtype="bfloat16",
        architectures=[ARCHITECTURE],
    )
    build_config = config_class(
        text_config=_text_config(tokenizer),
        vision_config=config.vision_config.to_dict(),
        img_context_token_id=config.img_context_token_id,
        attn_implementation="sdpa",
    )
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(build_config)
    _reinit_mamba_decay(model, generator)
    model = model.to(torch.bfloat16)
    if answer is not None:
        teach_answer(
            model.language_model,
            after=generation_prompt_ends(tokenizer),
            answer=tokenizer.convert_tokens_to_ids(answer),
            end=tokenizer.convert_tokens_to_ids(END_OF_TURN),
        )
    model.config = config
    model.save_pretrained(path, safe_serialization=True)

    config_json = json.loads((path / "config.json").read_text(encoding="utf-8"))
    config_json.pop("_attn_implementation_autoset", None)
    config_json.pop("attn_implementation", None)
    config_json["auto_map"] = {
        "AutoConfig": "configuration.NemotronH_Nano_VL_V2_Config",
        "AutoModel": "modeling.NemotronH_Nano_VL_V2",
        "AutoModelForCausalLM": "modeling.NemotronH_Nano_VL_V2",
    }
    config_json[STANDIN_MARKER] = True
    _write_json(path / "config.json", config_json)
    end_ids = [tokenizer.convert_tokens_to_ids("</s>"), tokenizer.convert_tokens_to_ids(END_OF_TURN)]
    GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=end_ids, pad_token_id=0).save_pretrained(path)

    tokenizer.save_pretrained(path)
    processor_auto_map = {
        "AutoImageProcessor": "image_processing.NemotronNanoVLV2ImageProcessor",
        "AutoProcessor": "processing.NemotronNanoVLV2Processor",
    }
    preprocessor = {
        "image_size": 512,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "max_num_tiles": 12,
        "use_thumbnail": True,
        "norm_mean": list(CLIP_MEAN),
        "norm_std": list(CLIP_STD),
        "do_rescale": True,
        "image_processor_type": "NemotronNanoVLV2ImageProcessor",
        "processor_class": "NemotronNanoVLV2Processor",
        "auto_map": processor_auto_map,
    }
    _write_json(path / "preprocessor_config.json", preprocessor)
    _write_json(
        path / "processor_config.json",
        {
            "processor_class": "NemotronNanoVLV2Processor",
            "auto_map": {"AutoProcessor": processor_auto_map["AutoProcessor"]},
        },
    )
    (path / "chat_template.jinja").write_text(CHAT_TEMPLATE, encoding="utf-8")
    return path


def _write_json(path: Path, data: dict[str, Any]) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
