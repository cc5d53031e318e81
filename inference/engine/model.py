"""The model assembled from parts and loaded from the checkpoint's real tensor names.

- Language model: transformers' own `NemotronHForCausalLM` (Mamba-2 + MLP + attention layers; the
  mamba-ssm / causal-conv1d kernels when they import, its pure-torch path otherwise), set to compute
  what vLLM's implementation computes where the two differ (`vllm_parity`). The checkpoint
  stores it as `language_model.backbone.*` and `language_model.lm_head.weight`; transformers names
  the backbone `model.`.
- Vision tower: `vision.RadioVision`, from `vision_model.radio_model.model.*`.
- Projector: `projector.Projector`, from `mlp1.*`.

Loading builds the modules without memory (meta device), then copies every tensor from the
safetensors files straight to the target device in the target dtype. A tensor the model does not
expect, or a parameter the files do not provide, fails the load by name: nothing is left at random.
`vision_model.radio_model.input_conditioner.*` (RADIO's own pixel normalization) is not a weight here:
the tiler normalizes with the config's mean and std, which must agree with it.

Nemotron-3-Nano-Omni checkpoints (Holotron-3-Nano) load here too. Their mixture-of-experts layers
store each expert apart (`mixer.experts.N.{up,down}_proj.weight`); transformers' Nemotron-H holds
them stacked (`mixer.experts.up_proj[N]`), so each is copied into its slice. The router's
`e_score_correction_bias` is a buffer, loaded and kept in float32 whatever the model's dtype (as
transformers and vLLM keep it). Their video patch embedder and audio tower (`sound*`) are not
loaded: Holodesk sends neither video nor audio.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from holodesk.inference.engine.projector import Projector, pixel_shuffle
from holodesk.inference.engine.spec import ModelSpec, weight_files
from holodesk.inference.engine.vision import RadioVision
from holodesk.inference.engine.vllm_parity import follow_vllm, transformers_config
from holodesk.inference.errors import ModelLoadError

_VISION = "vision_model.radio_model.model."
_CONDITIONER = "vision_model.radio_model.input_conditioner."
_IGNORED = ("vision_model.radio_model.summary_idxs",)
# Omni checkpoints only: video frames and audio, which the engine never takes.
_OMNI_IGNORED = (_VISION + "patch_generator.video_embedder.", "sound")
# One expert of a mixture-of-experts layer, stored apart: its slice of transformers' stacked tensor.
_EXPERT = re.compile(r"(.*\.mixer\.experts)\.(\d+)\.(up_proj|down_proj)\.weight")
# Buffers that are weights of the checkpoint (the router's load-balancing bias), kept in float32.
_FLOAT32_BUFFERS = (".e_score_correction_bias",)


class HolotronModel(nn.Module):
    """Vision tower + projector + Nemotron-H language model; `embed_images` and `language_model` are the seams."""

    def __init__(self, spec: ModelSpec, attention: str = "sdpa") -> None:
        super().__init__()
        # Imported where the model is built: nothing in the engine imports transformers before it is needed.
        from transformers.models.nemotron_h import NemotronHConfig, NemotronHForCausalLM

        self.spec = spec
        config = NemotronHConfig(**transformers_config(spec.llm_config))
        config._attn_implementation = attention
        self.language_model = NemotronHForCausalLM(config)
        follow_vllm(self.language_model)
        self.vision = RadioVision(spec.vision)
        factor = spec.shuffle_factor
        self.mlp1 = Projector(spec.vit_hidden * factor * factor, spec.projector_hidden, spec.hidden)

    def embed_images(self, tiles: torch.Tensor) -> torch.Tensor:
        """Tiles [n, 3, s, s] -> image-token embeddings [n * tokens_per_tile, hidden], tile by tile."""
        features = self.vision(tiles.to(next(self.vision.parameters()).dtype))
        # The checkpoint's code and vLLM hand the projector bfloat16 features whatever the model's dtype.
        features = features.to(torch.bfloat16).to(features.dtype)
        tokens = self.mlp1(pixel_shuffle(features, self.spec.shuffle_factor))
        return tokens.reshape(-1, tokens.shape[-1])

    def embed_tokens(self, ids: torch.Tensor) -> torch.Tensor:
        return self.language_model.model.embeddings(ids)


def _rename(name: str) -> str | None:
    """Checkpoint name -> this module's parameter name; None for tensors that are not weights here."""
    if name.startswith("language_model.backbone."):
        return "language_model.model." + name[len("language_model.backbone.") :]
    if name.startswith("language_model."):
        return name
    if name.startswith(_VISION):
        return "vision." + name[len(_VISION) :]
    if name.startswith("mlp1."):
        return name
    if name.startswith(_CONDITIONER) or name in _IGNORED:
        return None
    raise ModelLoadError(f"the checkpoint holds a tensor this engine does not know: {name}")


def _tensors(path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    from safetensors import safe_open

    for file in weight_files(path):
        with safe_open(str(file), framework="pt") as handle:
            for name in handle.keys():  # noqa: SIM118 - safe_open is not a mapping
                yield name, handle.get_tensor(name)


def _check_conditioner(spec: ModelSpec, name: str, tensor: torch.Tensor) -> None:
    expected = spec.norm_mean if name.endswith("norm_mean") else spec.norm_std
    if not torch.allclose(tensor.float().flatten(), torch.tensor(expected), atol=1e-3):
        raise ModelLoadError(
            f"{name} ({tensor.flatten().tolist()}) disagrees with config.json's {expected}: the pixels would be"
            " normalized differently from how the vision tower was trained"
        )


def load_model(spec: ModelSpec, device: torch.device, dtype: torch.dtype, attention: str = "sdpa") -> HolotronModel:
    """Build the model on `device` in `dtype` with every weight from the checkpoint; ModelLoadError otherwise."""
    with torch.device("meta"):
        model = HolotronModel(spec, attention)
    model = model.to(dtype).to_empty(device=device)
    buffers = {name: b for name, b in model.named_buffers() if name.endswith(_FLOAT32_BUFFERS)}
    for name, buffer in buffers.items():
        owner, _, attribute = name.rpartition(".")
        model.get_submodule(owner).register_buffer(attribute, torch.empty_like(buffer, dtype=torch.float32))
    buffers = {name: b for name, b in model.named_buffers() if name in buffers}
    params = dict(model.named_parameters())
    targets: dict[str, torch.Tensor] = {**params, **buffers}
    loaded: set[str] = set()
    experts: dict[str, set[int]] = {}
    for name, tensor in _tensors(spec.path):
        if spec.is_omni and name.startswith(_OMNI_IGNORED):
            continue
        target = _rename(name)
        if target is None:
            if name.startswith(_CONDITIONER):
                _check_conditioner(spec, name, tensor)
            continue
        # timm stores layer scale as `ls1.gamma`; some exports drop `.gamma`.
        if target not in targets and target + ".gamma" in targets:
            target += ".gamma"
        expert = _EXPERT.fullmatch(target)
        if expert is not None:
            target = f"{expert[1]}.{expert[3]}"
        param = targets.get(target)
        if param is None:
            raise ModelLoadError(f"the checkpoint holds a tensor the model has no place for: {name}")
        if expert is not None:
            index = int(expert[2])
            if index >= param.shape[0]:
                raise ModelLoadError(f"{name}: expert {index} of a layer with {param.shape[0]} experts")
            param = param[index]
            experts.setdefault(target, set()).add(index)
        if tuple(param.shape) != tuple(tensor.shape):
            raise ModelLoadError(f"{name} has shape {tuple(tensor.shape)}, the model expects {tuple(param.shape)}")
        with torch.no_grad():
            param.copy_(tensor.to(param.dtype))
        if expert is None or len(experts[target]) == targets[target].shape[0]:
            loaded.add(target)
    # Layer scale is optional in the checkpoint: where absent it is the config's constant.
    with torch.no_grad():
        for name, param in params.items():
            if name not in loaded and name.endswith((".ls1.gamma", ".ls2.gamma")):
                param.fill_(spec.vision.layer_scale)
                loaded.add(name)
    missing = sorted(set(targets) - loaded)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ModelLoadError(f"the checkpoint lacks {len(missing)} weights of the model: {shown}")
    for name, buffer in model.named_buffers():
        if name not in buffers:
            raise ModelLoadError(f"unexpected buffer {name} {tuple(buffer.shape)}: it would be left uninitialized")
    return model.eval()
