"""Put the tests' pure-torch mamba_ssm stand-in on the path, for benchmarks of the tiny stand-in model.

The stand-in's modeling code imports mamba-ssm as Holotron-12B's does; on a CPU machine the tests'
stand-in (tests/support/kernels) provides the one function it needs. Only the tiny-model benchmarks
call this: bench.gpu_step, which loads the real model, must meet the real mamba-ssm or none.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TEST_KERNELS = Path(__file__).resolve().parent.parent / "tests" / "support" / "kernels"


def use_test_kernels() -> None:
    """Append the stand-in kernels to sys.path and to PYTHONPATH (for child processes); an installed one wins."""
    folder = str(TEST_KERNELS)
    if folder not in sys.path:
        sys.path.append(folder)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if folder not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([*paths, folder])
