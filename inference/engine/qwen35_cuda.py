"""The Qwen3.5 engine's paths on a CUDA GPU: kernels bound into the Gated DeltaNet layers, their fused
projections, and decoded tokens replayed as one CUDA graph each (qwen35_decode).

The Gated DeltaNet forward is qwen35_cpu's (nothing in it is specific to the CPU): it reads the fused
input projections the static decoder reads, and calls the chunked delta rule through the layer's
transformers module, where `kernels.bind_kernels` puts flash-linear-attention's Triton kernel.
"""

from __future__ import annotations

import types

from torch import nn

from holodesk.inference.engine.kernels import DELTANETS, bind_kernels
from holodesk.inference.engine.qwen35_cpu import gated_deltanet_forward
from holodesk.inference.engine.qwen35_decode import fuse_projections


def accelerate_cuda(model: nn.Module) -> list[str]:
    """Put the CUDA paths in place in a Qwen3.5 model loaded on a GPU; what now runs, in words."""
    paths = bind_kernels(model, "cuda")
    layers = [module for module in model.modules() if type(module).__name__ in DELTANETS]
    for layer in layers:
        layer.forward = types.MethodType(gated_deltanet_forward, layer)
    deltanets, mlps = fuse_projections(model)
    if deltanets or mlps:
        paths.append(
            f"one product for each of {deltanets} DeltaNet layers' four input projections and {mlps} MLPs' gate and up"
        )
    return paths
