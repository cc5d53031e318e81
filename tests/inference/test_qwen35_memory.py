"""The Qwen3.5-family memory plan against what is really there: tensor bytes, transformers' cache, the processor.

Every figure the plan reads from headers is checked against an independent count on the tiny
checkpoints of bench/qwen35_tiny (dense and mixture of experts, bfloat16 and float32): the tensors'
bytes as safetensors loads them, and the cache transformers' own `Qwen3_5ForConditionalGeneration`
allocates for a prefill. The header sets the memory guide writes for the real models are checked
against a built checkpoint's own headers, so the fit table plans from the layout real files have;
Holotron-3-Nano's (Nemotron-3-Nano-Omni, planned by the in-process engine) against bench/nemotron_omni_tiny's.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from transformers.cache_utils import Cache

from bench.nemotron_omni_tiny import build_nemotron_omni_tiny
from bench.qwen35_tiny import VARIANTS, build_qwen35_tiny
from holodesk.inference.engine.memory import plan_memory as engine_plan_memory
from holodesk.inference.engine.spec import read_spec
from holodesk.inference.memory_guide import (
    GPU_SIZES_GIB,
    NEMOTRON3_NANO_OMNI,
    QWEN35_0P8B,
    QWEN35_35B_A3B,
    checkpoint_tensors,
    engine_plan,
    fits,
    holotron3_nano_fit,
    markdown_rows,
    omni_checkpoint_tensors,
    write_headers,
)
from holodesk.inference.qwen35_memory import (
    GIB,
    CheckpointLayoutError,
    image_patches,
    plan_checkpoint,
    plan_memory,
    read_headers,
)

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module", params=["reference", "moe"])
def tiny(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_qwen35_tiny(tmp_path_factory.mktemp("qwen35") / request.param, variant=request.param)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_weights_are_the_tensors_bytes(tmp_path: Path, dtype: str) -> None:
    for variant in ("reference", "moe"):
        path = build_qwen35_tiny(tmp_path / variant, dtype=dtype, variant=variant)  # type: ignore[arg-type]
        tensors = load_file(str(path / "model.safetensors"))
        vision = sum(t.numel() * t.element_size() for name, t in tensors.items() if name.startswith("model.visual."))
        text = sum(t.numel() * t.element_size() for name, t in tensors.items()) - vision
        plan = plan_checkpoint(path)
        assert (plan.text_weights, plan.vision_weights) == (text, vision)
        embedding = tensors["model.language_model.embed_tokens.weight"]
        assert plan.embedding == embedding.numel() * embedding.element_size()
        # In another run dtype every element takes that dtype's size.
        elements = sum(t.numel() for t in tensors.values())
        assert plan_checkpoint(path, dtype="float32").weights == 4 * elements
        assert plan_checkpoint(path, dtype="bfloat16").weights == 2 * elements


def _cache_bytes(cache: Cache) -> int:
    """Every tensor transformers' cache holds for the sequence, summed."""
    from transformers.cache_utils import DynamicLayer, LinearAttentionLayer

    total = 0
    for layer in cache.layers:
        if isinstance(layer, LinearAttentionLayer):
            states = [*layer.conv_states.values(), *layer.recurrent_states.values()]
        else:
            assert isinstance(layer, DynamicLayer)
            states = [layer.keys, layer.values]
        total += sum(t.numel() * t.element_size() for t in states if t is not None)
    return total


@pytest.mark.parametrize("tokens", [37, 150])
def test_cache_is_what_transformers_allocates_for_a_prefill(tiny: Path, tokens: int) -> None:
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny, dtype=torch.bfloat16).eval()
    ids = torch.randint(0, 500, (1, tokens), generator=torch.Generator().manual_seed(tokens))
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        allocated = _cache_bytes(out.past_key_values)
        # One decoded token later the state is the same size and the keys one token longer.
        step = model(input_ids=ids[:, :1], past_key_values=out.past_key_values, use_cache=True)
        after_step = _cache_bytes(step.past_key_values)
    plan = plan_checkpoint(tiny, dtype="bfloat16")
    assert plan.cache(tokens) == allocated
    assert plan.cache(tokens + 1) == after_step


def test_the_memory_guides_header_sets_are_the_real_layout(tiny: Path) -> None:
    config = json.loads((tiny / "config.json").read_text())
    assert checkpoint_tensors(config) == read_headers(tiny)


def _write_header_only(folder: Path, config: dict[str, object]) -> Path:
    """A checkpoint of headers without data: what the plan reads, at a real model's size, in a few kB."""
    folder.mkdir()
    return write_headers(folder, config, checkpoint_tensors(config))


def test_a_header_only_checkpoint_plans_as_the_real_shapes(tmp_path: Path) -> None:
    path = _write_header_only(tmp_path / "holo31-0.8b", QWEN35_0P8B)
    plan = plan_checkpoint(path, dtype="bfloat16")
    assert plan == plan_memory(QWEN35_0P8B, checkpoint_tensors(QWEN35_0P8B), dtype="bfloat16")
    # Qwen3.5-0.8B without its MTP head: 852,985,920 parameters (the bench variant's index says the same).
    assert plan.weights == 2 * 852_985_920
    # 6 attention layers x keys and values x 2 kv heads x 256 x bfloat16; 18 DeltaNet layers x (conv window
    # 6144 x 4 x bfloat16 + state 16 x 128 x 128 x float32).
    assert plan.kv_per_token == 6 * 2 * 2 * 256 * 2
    assert plan.state_per_sequence == 18 * (6144 * 4 * 2 + 16 * 128 * 128 * 4)


def test_the_bench_variant_has_the_guides_shapes() -> None:
    variant, text = VARIANTS["holo31-0.8b"], QWEN35_0P8B["text_config"]
    vision = QWEN35_0P8B["vision_config"]
    assert (variant.hidden, variant.layers, variant.mlp_hidden) == (
        text["hidden_size"],
        text["num_hidden_layers"],
        text["intermediate_size"],
    )
    assert (variant.attention_heads, variant.kv_heads, variant.head_dim) == (
        text["num_attention_heads"],
        text["num_key_value_heads"],
        text["head_dim"],
    )
    assert (variant.linear_key_heads, variant.linear_value_heads, variant.vocab_size) == (
        text["linear_num_key_heads"],
        text["linear_num_value_heads"],
        text["vocab_size"],
    )
    assert (variant.vit_layers, variant.vit_hidden, variant.vit_mlp, variant.vit_heads) == (
        vision["depth"],
        vision["hidden_size"],
        vision["intermediate_size"],
        vision["num_heads"],
    )
    assert variant.tie_word_embeddings == QWEN35_0P8B["tie_word_embeddings"]


@pytest.mark.parametrize("size", [(1280, 800), (1920, 1080), (320, 200), (3840, 2160), (5000, 4000)])
def test_image_patches_are_the_processors(size: tuple[int, int]) -> None:
    from PIL import Image
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    # The real preprocessor_config.json's values (bench/qwen35_tiny writes the same).
    processor = Qwen2VLImageProcessorPil(
        patch_size=16, temporal_patch_size=2, merge_size=2, size={"shortest_edge": 65536, "longest_edge": 16777216}
    )
    processed = processor(images=[Image.new("RGB", size)], return_tensors="pt")
    assert image_patches(*size) == int(processed["image_grid_thw"][0].prod())


def test_a_folder_that_is_not_qwen35_is_refused_in_words(tmp_path: Path) -> None:
    with pytest.raises(CheckpointLayoutError, match=r"no config\.json"):
        plan_checkpoint(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "nemotron_h", "hidden_size": 8}))
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 2) + b"{}")
    with pytest.raises(CheckpointLayoutError, match=r"no 'layer_types'.*qwen3_5"):
        plan_checkpoint(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"\x01")
    with pytest.raises(CheckpointLayoutError, match="not a safetensors file"):
        read_headers(tmp_path)


def test_the_fit_table() -> None:
    by_name = {fit.model.name: fit for fit in fits()}
    small, moe = by_name["Holo3.1-0.8B"], by_name["Holo4-35B-A3B"]
    assert all(small.fits_gpu(size * GIB) for size in GPU_SIZES_GIB)
    assert not any(moe.fits_gpu(size * GIB) for size in GPU_SIZES_GIB)  # 35 B parameters in bfloat16: 65 GiB
    assert moe.plan == plan_memory(QWEN35_35B_A3B, checkpoint_tensors(QWEN35_35B_A3B), dtype="bfloat16")
    assert [fit.gpu_bytes for fit in fits()] == sorted(fit.gpu_bytes for fit in fits())


def test_holotron3_nanos_header_set_is_the_real_layout_and_plans_as_the_files_do(tmp_path: Path) -> None:
    """The guide's Nemotron-3-Nano-Omni header set is bench/nemotron_omni_tiny's checkpoint's, name for name,
    and the engine plans header-only files as it plans the checkpoint itself."""
    tiny = build_nemotron_omni_tiny(tmp_path / "omni")
    config = json.loads((tiny / "config.json").read_text())
    tensors = omni_checkpoint_tensors(config)
    assert tensors == read_headers(tiny)
    files = engine_plan_memory(
        read_spec(tiny), dtype_bytes=2, context=16384, prefill_chunk=2048, keep_state=True, max_tiles=12
    )
    assert engine_plan(config, tensors) == files


def test_holotron3_nano_is_planned_at_its_bases_public_size() -> None:
    tensors = omni_checkpoint_tensors(NEMOTRON3_NANO_OMNI)
    language = sum(t.elements for name, t in tensors.items() if name.startswith("language_model."))
    assert 31.5e9 < language < 31.7e9  # NVIDIA's figure for Nemotron-3-Nano-30B-A3B: 31.6 billion
    fit = holotron3_nano_fit()
    assert fit.plan.weights == 2 * sum(t.elements for t in tensors.values())  # bfloat16, no audio tower
    assert not any(fit.fits_gpu(size * GIB) for size in GPU_SIZES_GIB)


def test_the_readme_table_is_the_guides() -> None:
    readme = README.read_text(encoding="utf-8")
    missing = [row for row in markdown_rows() if row[:-1] not in readme]
    assert not missing, "README.md's model memory table is out of date; these rows are missing:\n" + "\n".join(missing)
