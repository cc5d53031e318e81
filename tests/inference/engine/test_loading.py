"""Loading refuses, by name, a checkpoint that does not fit: wrong architecture, a stray or missing tensor."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from holodesk.inference.engine.model import load_model
from holodesk.inference.engine.spec import read_spec
from holodesk.inference.errors import ModelLoadError


def _copy(source: Path, target: Path, edit: Callable[[dict[str, torch.Tensor]], object]) -> Path:
    shutil.copytree(source, target)
    tensors = load_file(str(target / "model.safetensors"))
    edit(tensors)
    save_file(tensors, str(target / "model.safetensors"))
    (target / "model.safetensors.index.json").unlink()
    return target


def _load(path: Path) -> None:
    load_model(read_spec(path), torch.device("cpu"), torch.float32)


def test_every_tensor_lands_somewhere_and_every_weight_is_loaded(real_layout_checkpoint: Path) -> None:
    model = load_model(read_spec(real_layout_checkpoint), torch.device("cpu"), torch.float32)
    saved = load_file(str(real_layout_checkpoint / "model.safetensors"))
    # Spot checks through the renaming: the backbone, the lm head, the vision tower, the projector.
    assert torch.equal(model.language_model.model.embeddings.weight, saved["language_model.backbone.embeddings.weight"])
    assert torch.equal(model.language_model.lm_head.weight, saved["language_model.lm_head.weight"])
    assert torch.equal(
        model.vision.blocks[1].attn.qkv.weight, saved["vision_model.radio_model.model.blocks.1.attn.qkv.weight"]
    )
    assert torch.equal(model.mlp1[3].weight, saved["mlp1.3.weight"])


def test_a_stray_tensor_is_refused_by_name(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    path = _copy(real_layout_checkpoint, tmp_path / "stray", lambda t: t.update({"mlp1.9.weight": torch.ones(2)}))
    with pytest.raises(ModelLoadError, match=r"mlp1\.9\.weight"):
        _load(path)


def test_a_missing_weight_is_refused_by_name(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    path = _copy(real_layout_checkpoint, tmp_path / "missing", lambda t: t.pop("language_model.lm_head.weight"))
    with pytest.raises(ModelLoadError, match=r"lacks 1 weights.*lm_head"):
        _load(path)


def test_a_wrong_shape_is_refused(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    def shrink(tensors: dict[str, torch.Tensor]) -> None:
        tensors["mlp1.1.weight"] = tensors["mlp1.1.weight"][:-1]

    with pytest.raises(ModelLoadError, match=r"mlp1\.1\.weight has shape"):
        _load(_copy(real_layout_checkpoint, tmp_path / "shape", shrink))


def test_another_architecture_is_refused(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    path = tmp_path / "other"
    shutil.copytree(real_layout_checkpoint, path)
    config = json.loads((path / "config.json").read_text())
    config["architectures"] = ["Qwen2VLForConditionalGeneration"]
    (path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="not a Nemotron-Nano-VL-v2 checkpoint"):
        read_spec(path)
