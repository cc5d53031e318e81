"""Where transformers' Nemotron-H and vLLM's differ, and how the engine follows vLLM.

Holotron-12B was trained and benchmarked on vLLM, so the engine must compute what vLLM's
`nemotron_h` / `mamba_mixer2` compute, not what transformers' `NemotronHForCausalLM` would on its
own. Read side by side (transformers 5.19, vLLM 0.32), the two differ in these places:

- **dt range.** transformers clamps the Mamba-2 step size after softplus to at least
  `time_step_min` (1e-3) in its chunked scan (and hands the same limit to the fused kernels);
  vLLM's mixer uses (0, inf) everywhere. A checkpoint whose dt falls below 1e-3 gives log-prob
  gaps of 2-3e-2 with the clamp. `follow_vllm` sets every mixer's limit to (0, inf).
- **MLP activation.** vLLM's dense MLP layer always applies relu2 and never reads
  `mlp_hidden_act`; transformers applies whatever the key names. Another value is refused.
- **Sliding window.** vLLM honours a `sliding_window` in the config for the attention layers;
  transformers' Nemotron-H ignores it. A window is refused.
- **Per-layer MLP widths.** vLLM reads `intermediate_size` as one width or a list of widths (one per
  MLP layer); transformers' MLP takes it as one number. A one-element list is that number; a longer
  list is refused.
- **RADIO registers.** vLLM pads the class tokens with registers up to `register_multiple` and never
  reads `num_registers`; a `num_registers` that disagrees is refused (in `spec`, with the vision tower).

Places read and found equal (so nothing to do): the gated RMSNorm (silu of the gate in float32,
then a per-group norm over `intermediate / n_groups`), attention without biases, scaling
head_dim^-0.5 and no rotary embedding, pre-norm residuals with `layer_norm_epsilon`, the conv
activation (`mamba_hidden_act`), Mamba in/out projection biases (`use_bias`) and MLP biases
(`mlp_bias`), no dt clamp on the one-token decode path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from holodesk.inference.errors import ModelLoadError

if TYPE_CHECKING:  # read_spec uses this module before anything imports torch
    from torch import nn

# vLLM's MambaMixer2: dt after softplus is never clamped from below (nor above).
VLLM_DT_LIMIT = (0.0, float("inf"))


def config_problem(llm: dict[str, Any]) -> str | None:
    """Why a Nemotron-H config would mean one thing to vLLM and another to transformers; None when it agrees."""
    act = llm.get("mlp_hidden_act", "relu2")
    if act != "relu2":
        return (
            f"config.json: mlp_hidden_act is {act!r}; vLLM's Nemotron-H ignores the key and applies relu2, so the"
            " checkpoint would compute differently here and on vLLM"
        )
    if llm.get("sliding_window") is not None:
        return (
            f"config.json: sliding_window {llm['sliding_window']!r}; vLLM limits attention to it and transformers'"
            " Nemotron-H does not, so this engine refuses it"
        )
    width = llm.get("intermediate_size")
    if isinstance(width, list) and len(width) != 1:
        return (
            f"config.json: intermediate_size is a list of {len(width)} widths (one per MLP layer); transformers'"
            " Nemotron-H builds every MLP with one width"
        )
    return None


def transformers_config(llm: dict[str, Any]) -> dict[str, Any]:
    """The config as transformers' NemotronHConfig should be given it (a one-element width list unwrapped)."""
    problem = config_problem(llm)
    if problem:
        raise ModelLoadError(problem)
    width = llm.get("intermediate_size")
    if isinstance(width, list):
        return {**llm, "intermediate_size": width[0]}
    return dict(llm)


def follow_vllm(language_model: nn.Module) -> int:
    """Give every Mamba-2 mixer vLLM's dt range; returns how many mixers there were."""
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    mixers = [module for module in language_model.modules() if isinstance(module, NemotronHMamba2Mixer)]
    for mixer in mixers:
        mixer.time_step_limit = VLLM_DT_LIMIT
    return len(mixers)
