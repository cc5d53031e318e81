"""The stand-in checkpoint fails where the real Nemotron-Nano-12B-v2-VL files fail, and the loader survives it.

Each refusal is the real file's behaviour (issue 9, points 1-6): no mamba-ssm, no import; the
image processor is found only once registered; flash attention asked for without flash-attn is an
ImportError; float32 weights fail in the projector because generate casts image features to bf16.
The naive loads run in a child process (tests/support/standin_refusals.py): transformers' registries
and imported modules are process-wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from holodesk.inference.errors import BackendError, ModelLoadError
from holodesk.inference.load_plan import (
    CheckpointFacts,
    attention_config,
    choose_attention,
    import_errors,
    plan_load,
    read_checkpoint_facts,
)
from holodesk.inference.local import LocalBackend, stop_token_ids
from holodesk.inference.processor_adapter import render_prompt
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.standin import IMAGE_TOKENS_PER_TILE
from tests.inference.test_local import fake_report, holotron_sized

REPO = Path(__file__).resolve().parents[2]


def naive_loads(checkpoint: Path, *flags: str) -> dict[str, str]:
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.standin_refusals", str(checkpoint), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_stand_in_refuses_naive_loading_as_the_real_checkpoint_does(tiny_checkpoint: Path) -> None:
    found = naive_loads(tiny_checkpoint)
    assert found["processor"].startswith("ValueError: Could not find module NemotronNanoVLV2ImageProcessor")
    assert found["flash_attention_2"].startswith("ImportError: FlashAttention2 has been toggled on")
    # transformers 4.53.3 hands the config attn_implementation=None, which the config pushes down as "eager".
    assert found["default attention"] == "eager"
    assert found["float32 load"] == "OK"  # loading works; the first image fails in the bf16 projector
    assert "same dtype" in found["float32 generate"] and "BFloat16" in found["float32 generate"]


def test_without_mamba_ssm_the_stand_in_does_not_import(tiny_checkpoint: Path) -> None:
    found = naive_loads(tiny_checkpoint, "--no-kernels")
    assert found["float32 load"] == "ImportError: mamba-ssm is required by the Mamba model but cannot be imported"


def test_the_loader_registers_chooses_sdpa_and_keeps_bf16(tiny_backend: LocalBackend) -> None:
    loaded = tiny_backend._loaded
    assert loaded is not None
    assert type(loaded.processor).__name__ == "NemotronNanoVLV2Processor"
    assert type(loaded.processor.image_processor).__name__ == "NemotronNanoVLV2ImageProcessor"
    assert loaded.model.config.architectures == ["NemotronH_Nano_VL_V2"]
    assert loaded.model.language_model.config._attn_implementation == "sdpa"
    assert loaded.model.vision_model.config.use_flash_attn is False
    assert loaded.model.dtype == torch.bfloat16
    assert tiny_backend.plan is not None and tiny_backend.plan.attention == "sdpa"


def test_the_stand_in_processor_outputs_what_the_real_one_does(tiny_backend: LocalBackend) -> None:
    processor = tiny_backend._loaded.processor  # type: ignore[union-attr]
    outputs = processor(text=["<image>hi"], images=[Image.new("RGB", (1920, 1080), (9, 9, 9))], return_tensors="pt")
    assert outputs["pixel_values"].dtype == torch.float32 and tuple(outputs["pixel_values"].shape) == (9, 3, 512, 512)
    assert outputs["image_flags"].tolist() == [[1]] * 9
    assert isinstance(outputs["num_patches"], torch.Tensor) and outputs["num_patches"].tolist() == [9]
    ids = outputs["input_ids"][0].tolist()
    assert ids.count(processor.image_token_id) == 9 * IMAGE_TOKENS_PER_TILE


def test_float32_is_refused_before_loading_for_this_architecture(tiny_checkpoint: Path) -> None:
    backend = LocalBackend(tiny_checkpoint, device="cpu", dtype="float32")
    stages: list[str] = []
    error = backend.load_async(lambda step: stages.append(step.stage)).exception(timeout=60)
    assert isinstance(error, ModelLoadError) and "bfloat16 only" in str(error)
    assert stages == ["locating", "checking"]


def test_the_real_architecture_needs_mamba_ssm_and_a_gpu(tmp_path: Path) -> None:
    real = CheckpointFacts(architectures=("NemotronH_Nano_VL_V2",), standin=False)
    with pytest.raises(ModelLoadError, match="cannot run on the CPU") as cpu:
        plan_load(holotron_sized(tmp_path), "cpu", None, fake_report(), facts=real)
    assert "CUDA GPU" in str(cpu.value)
    with pytest.raises(ModelLoadError, match="it cannot load without mamba-ssm") as kernels:
        plan_load(holotron_sized(tmp_path), "cuda", None, fake_report(), facts=real, mamba_error="No module named x")
    assert "holodesk[cuda]" in str(kernels.value)
    mismatch = "torchvision: RuntimeError: operator torchvision::nms does not exist"
    with pytest.raises(ModelLoadError, match="its own code cannot import what it needs") as imports:
        plan_load(holotron_sized(tmp_path), "cuda", None, fake_report(), facts=real, import_error=mismatch)
    assert mismatch in str(imports.value) and "torchvision 0.28.0" in str(imports.value)
    assert import_errors(("einops", "holodesk_no_such_module")) == (
        "holodesk_no_such_module: ModuleNotFoundError: No module named 'holodesk_no_such_module'"
    )
    assert import_errors() is None  # here torchvision (or the tests' stand-in for it) and einops import
    assert read_checkpoint_facts(tmp_path) == CheckpointFacts(architectures=(), standin=False)


def test_attention_is_chosen_explicitly_and_reaches_every_sub_model(tiny_checkpoint: Path) -> None:
    assert choose_attention("cuda:0", flash_available=True) == "flash_attention_2"
    assert choose_attention("cuda:0", flash_available=False) == "sdpa"
    assert choose_attention("cpu", flash_available=True) == "sdpa"
    import transformers

    config = transformers.AutoConfig.from_pretrained(tiny_checkpoint, trust_remote_code=True, local_files_only=True)
    attention_config(config, "flash_attention_2")
    assert config.text_config._attn_implementation == "flash_attention_2" and config.vision_config.use_flash_attn
    attention_config(config, "sdpa")
    assert config.text_config._attn_implementation == "sdpa" and not config.vision_config.use_flash_attn


def test_generation_stops_on_the_checkpoints_own_end_of_turn(tiny_backend: LocalBackend) -> None:
    loaded = tiny_backend._loaded
    assert loaded is not None
    tokenizer = loaded.tokenizer
    end_of_turn = tokenizer.convert_tokens_to_ids("<SPECIAL_12>")
    assert "<|im_end|>" not in tokenizer.get_vocab()
    assert stop_token_ids(tiny_backend.checkpoint.path, tokenizer) == [  # type: ignore[union-attr]
        tokenizer.convert_tokens_to_ids("</s>"),
        end_of_turn,
    ]
    # Make <SPECIAL_12> the model's pick after the first token: generation must end right there.
    calls = {"n": 0}

    def favour_end_of_turn(module: torch.nn.Module, inputs: object, output: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        if calls["n"] >= 2:
            output = output.clone()
            output[..., end_of_turn] = output.max() + 100.0
        return output

    hook = loaded.model.language_model.lm_head.register_forward_hook(favour_end_of_turn)
    try:
        request = ChatRequest(messages=[{"role": "user", "content": "hello"}], images=[], max_new_tokens=20)
        result = tiny_backend.generate_detailed(request)
    finally:
        hook.remove()
    assert len(result.new_token_ids) == 2 and result.new_token_ids[-1] == end_of_turn


def test_a_multi_turn_conversation_renders_through_the_checkpoints_template(tiny_backend: LocalBackend) -> None:
    shots = [Image.new("RGB", (64, 48), (i, i, i)) for i in range(2)]
    request = ChatRequest(
        messages=[
            {"role": "system", "content": "You drive the desktop. /no_think"},
            {"role": "user", "content": [{"type": "text", "text": "Task: open mail"}, {"type": "image"}]},
            {"role": "assistant", "content": '{"thought": "click", "tool_call": {"tool_name": "wait_desktop"}}'},
            {"role": "user", "content": [{"type": "text", "text": "waited 1 s"}, {"type": "image"}]},
        ],
        images=shots,
        max_new_tokens=1,
    )
    prompt = render_prompt(tiny_backend._loaded.processor, request)  # type: ignore[union-attr]
    assert prompt == (
        "<SPECIAL_10>System\nYou drive the desktop.\n"
        "<SPECIAL_11>User\nTask: open mail<image>\n"
        '<SPECIAL_11>Assistant\n{"thought": "click", "tool_call": {"tool_name": "wait_desktop"}}\n<SPECIAL_12>\n'
        "<SPECIAL_11>User\nwaited 1 s<image>\n"
        "<SPECIAL_11>Assistant\n<think></think>"
    )
    thinking = ChatRequest(messages=[{"role": "user", "content": "hi"}], images=[], max_new_tokens=1)
    assert render_prompt(tiny_backend._loaded.processor, thinking).endswith("<SPECIAL_11>Assistant\n<think>\n")  # type: ignore[union-attr]
    result = tiny_backend.generate_detailed(request)
    assert result.timings.tokens_in > 2 * IMAGE_TOKENS_PER_TILE


@pytest.mark.parametrize(
    ("messages", "images", "error"),
    [
        ([{"role": "tool", "content": "x"}], 0, "role 'tool'"),
        ([{"role": "user", "content": [{"type": "video"}]}], 0, "part type 'video'"),
        ([{"role": "user", "content": [{"type": "image"}] * 5}], 5, "at most 4"),
    ],
)
def test_requests_the_template_cannot_render_are_refused(
    tiny_backend: LocalBackend, messages: list[dict[str, object]], images: int, error: str
) -> None:
    request = ChatRequest(messages=messages, images=[Image.new("RGB", (8, 8))] * images, max_new_tokens=1)
    with pytest.raises(BackendError, match=error):
        tiny_backend.generate(request)
