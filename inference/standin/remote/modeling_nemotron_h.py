"""The stand-in's language model: Bamba, with Mamba's gated RMSNorm computed by mamba-ssm's kernel.

Like the real `modeling_nemotron_h.py`, this file imports `mamba_ssm.ops.triton.layernorm_gated.rmsnorm_fn`
unconditionally and uses it in the plain PyTorch path too: without mamba-ssm it does not import,
and so the checkpoint does not load. (Tests put a small pure-torch `mamba_ssm` on the path.)
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import BambaForCausalLM
from transformers.models.bamba import modeling_bamba

try:
    from mamba_ssm.ops.triton.layernorm_gated import rmsnorm_fn
except ImportError:
    raise ImportError("mamba-ssm is required by the Mamba model but cannot be imported") from None

from .configuration_nemotron_h import NemotronHConfig


class MambaRMSNormGated(modeling_bamba.BambaRMSNormGated):
    """The gated norm of the Mamba mixers, through mamba-ssm's `rmsnorm_fn` (gate applied before the norm)."""

    def forward(self, hidden_states: torch.Tensor, gate: torch.Tensor | None = None) -> torch.Tensor:
        return rmsnorm_fn(
            hidden_states, self.weight, None, z=gate, eps=self.variance_epsilon, norm_before_gate=False
        ).to(hidden_states.dtype)


class NemotronHForCausalLM(BambaForCausalLM):
    config_class = NemotronHConfig

    def _supports_default_dynamic_cache(self) -> bool:
        # generate() would otherwise start a plain DynamicCache (it exempts only class names with "bamba");
        # Bamba's prepare_inputs_for_generation builds the hybrid Mamba/attention cache itself.
        return False

    def __init__(self, config: NemotronHConfig, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        for module in self.modules():
            norm = getattr(module, "norm", None)
            if isinstance(norm, modeling_bamba.BambaRMSNormGated) and not isinstance(norm, MambaRMSNormGated):
                replacement = MambaRMSNormGated(norm.weight.shape[0], eps=norm.variance_epsilon)
                module.norm = replacement
