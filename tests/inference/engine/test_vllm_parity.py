"""The engine follows vLLM where transformers' Nemotron-H differs (inference/engine/vllm_parity.py).

The proof that the numbers agree is the reference tier (test_against_vllm.py, against vLLM itself);
here, without a server: each config that would mean one thing to vLLM and another to transformers is
refused by name before a weight is read, and the realistic checkpoint really puts the Mamba step
size on both sides of transformers' 1e-3 floor, so the tier's comparison decides something.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from bench.nemotron_tiny import build_nemotron_tiny
from holodesk.inference.engine.model import load_model
from holodesk.inference.engine.spec import read_spec
from holodesk.inference.engine.vllm_parity import VLLM_DT_LIMIT
from holodesk.inference.errors import ModelLoadError


@pytest.fixture(scope="module")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_nemotron_tiny(tmp_path_factory.mktemp("parity") / "realistic", dtype="float32", variant="realistic")


def _with_llm(source: Path, target: Path, **changes: Any) -> Path:
    shutil.copytree(source, target)
    config = json.loads((target / "config.json").read_text())
    config["llm_config"].update(changes)
    (target / "config.json").write_text(json.dumps(config))
    return target


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"mlp_hidden_act": "silu"}, "mlp_hidden_act"),
        ({"sliding_window": 4096}, "sliding_window"),
        ({"intermediate_size": [128, 256]}, "intermediate_size"),
    ],
)
def test_a_config_vllm_reads_otherwise_is_refused_by_name(
    real_layout_checkpoint: Path, tmp_path: Path, changes: dict[str, Any], named: str
) -> None:
    path = _with_llm(real_layout_checkpoint, tmp_path / "ckpt", **changes)
    with pytest.raises(ModelLoadError, match=named):
        read_spec(path)


def test_registers_vllm_would_not_place_are_refused(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    target = shutil.copytree(real_layout_checkpoint, tmp_path / "ckpt")
    config = json.loads((target / "config.json").read_text())
    config["vision_config"]["args"]["num_registers"] = 3  # register_multiple 8 with one class token gives 7
    (target / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelLoadError, match="num_registers"):
        read_spec(target)


def test_a_one_width_list_is_that_width(real_layout_checkpoint: Path, tmp_path: Path) -> None:
    width = json.loads((real_layout_checkpoint / "config.json").read_text())["llm_config"]["intermediate_size"]
    path = _with_llm(real_layout_checkpoint, tmp_path / "ckpt", intermediate_size=[width])
    model = load_model(read_spec(path), torch.device("cpu"), torch.float32)
    assert model.language_model.config.intermediate_size == width


def _dt_values(model: torch.nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Every Mamba-2 step size (softplus(dt + dt_bias)) the prompt produces, read at each mixer's input projection."""
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    seen: list[torch.Tensor] = []
    handles = []
    for mixer in model.modules():
        if isinstance(mixer, NemotronHMamba2Mixer):

            def hook(_module: Any, _args: Any, out: torch.Tensor, mixer: NemotronHMamba2Mixer = mixer) -> None:
                seen.append(F.softplus(out[..., -mixer.num_heads :] + mixer.dt_bias).flatten())

            handles.append(mixer.in_proj.register_forward_hook(hook))
    with torch.inference_mode():
        model(input_ids=ids)
    for handle in handles:
        handle.remove()
    return torch.cat(seen)


def test_every_mixer_has_vllms_dt_range_and_the_realistic_checkpoint_crosses_transformers_floor(
    realistic: Path,
) -> None:
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    model = load_model(read_spec(realistic), torch.device("cpu"), torch.float32).language_model
    mixers = [m for m in model.modules() if isinstance(m, NemotronHMamba2Mixer)]
    assert mixers and all(m.time_step_limit == VLLM_DT_LIMIT for m in mixers)
    ids = torch.arange(3, 200).unsqueeze(0)
    dt = _dt_values(model, ids)
    floor = model.config.time_step_min
    assert floor == pytest.approx(1e-3)
    # Both sides of the floor, by a wide margin: a clamp there changes this checkpoint's answers.
    assert (dt < floor / 10).float().mean() > 0.05 and (dt > floor * 10).float().mean() > 0.05
    with torch.inference_mode():
        ours = model(input_ids=ids).logits[0, -1].log_softmax(-1)
        for mixer in mixers:
            mixer.time_step_limit = (floor, float("inf"))  # what transformers does on its own
        clamped = model(input_ids=ids).logits[0, -1].log_softmax(-1)
    assert (ours - clamped).abs().max() > 1e-3
