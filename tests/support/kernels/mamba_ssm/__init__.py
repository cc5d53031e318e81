"""A test-only, pure-torch stand-in for the parts of mamba-ssm the stand-in checkpoint imports.

Only `mamba_ssm.ops.triton.layernorm_gated.rmsnorm_fn` exists; the selective-scan kernels do not, so
holodesk's hardware probe still reports the real kernels as missing.
"""

__version__ = "0.0.0+holodesk.tests"
