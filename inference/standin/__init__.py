"""A tiny random-weight vision-language model that loads like Holotron-12B, for tests on any CPU.

Its files are shaped like Nemotron-Nano-12B-v2-VL's and fail where those fail (see builder.py): the
modeling code imports mamba-ssm and the image processor torchvision, so both must import (the tests
put pure-torch stand-ins from tests/support/kernels on sys.path; they are never shipped). Call
`isolate_hf_environment()` before transformers is first imported (a conftest does), then
`build_tiny_checkpoint(tmp_dir)`; hand the returned folder to `inference.local.LocalBackend`, which
runs it on the CPU in bfloat16 (the only checkpoint allowed there).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import warnings
from pathlib import Path

from holodesk.inference.standin.builder import IMAGE_TOKENS_PER_TILE, build_tiny_checkpoint

__all__ = ["IMAGE_TOKENS_PER_TILE", "build_tiny_checkpoint", "isolate_hf_environment"]


def isolate_hf_environment() -> Path:
    """Keep tests off the Hub and out of the user's caches: offline mode, private modules cache.

    transformers reads HF_MODULES_CACHE (where remote code is copied and imported from) once, at
    import, so this must run before the first `import transformers` to take effect. Returns the
    modules cache in use.
    """
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if "HF_MODULES_CACHE" not in os.environ:
        modules = tempfile.mkdtemp(prefix="holodesk-hf-modules-")
        atexit.register(shutil.rmtree, modules, ignore_errors=True)
        os.environ["HF_MODULES_CACHE"] = modules
    if "transformers" in sys.modules:
        from transformers.utils import hub

        if os.environ["HF_MODULES_CACHE"] != hub.HF_MODULES_CACHE:
            warnings.warn(
                "transformers was imported before isolate_hf_environment():"
                f" remote code goes to {hub.HF_MODULES_CACHE}",
                stacklevel=2,
            )
            return Path(hub.HF_MODULES_CACHE)
    return Path(os.environ["HF_MODULES_CACHE"])
