"""What the checkpoint's config.json says about the model's shape, read once into typed values.

Nemotron-Nano-VL-v2 checkpoints (Holotron-12B) differ between revisions in key names: the language
model's config is `llm_config` or `text_config`, the image token id `img_context_token_id` or
`image_context_token_id`. The vision tower is C-RADIO, a timm ViT whose sizes are named by
`vision_config.args.model` and may be overridden by explicit sizes in the same `args`. Whatever this
engine cannot run (a vision layer norm before the projector, another pixel-shuffle order) is refused
here, by name, before any weight is read.

Nemotron-3-Nano-Omni checkpoints (Holotron-3-Nano; architecture `NemotronH_Nano_Omni_Reasoning_V3`)
are the same family to this engine: a Nemotron-H language model (with mixture-of-experts layers),
C-RADIO and the same projector. Where `vision_config.args` names `min_num_patches`, images are not
tiled but resized whole (dynamic resolution, `omni_images`), as vLLM decides by the same key.

The weight files and their safetensors headers (names and shapes, no weights) are read here too.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodesk.inference.engine.vllm_parity import config_problem
from holodesk.inference.errors import ModelLoadError

ARCHITECTURE = "NemotronH_Nano_VL_V2"
# Nemotron-3-Nano-Omni (Holotron-3-Nano's base): the same engine, dynamic-resolution images, MoE layers.
OMNI_ARCHITECTURE = "NemotronH_Nano_Omni_Reasoning_V3"
ARCHITECTURES = (ARCHITECTURE, OMNI_ARCHITECTURE)
# transformers' native Nemotron-H (with a hybrid DynamicCache that continues Mamba state over chunks).
TRANSFORMERS_MIN = (5, 3)


def transformers_problem() -> str | None:
    """Why transformers cannot serve this engine here, or None when it can."""
    try:
        from importlib.metadata import PackageNotFoundError, version

        installed = version("transformers")
    except PackageNotFoundError:
        return "transformers is not installed: pip install 'holodesk[holotron]'"
    parts = tuple(int(p) for p in installed.split(".")[:2] if p.isdigit())
    if parts < TRANSFORMERS_MIN:
        return (
            f"transformers {installed} has no native Nemotron-H; the in-process engine needs"
            f" transformers >= {'.'.join(map(str, TRANSFORMERS_MIN))}"
        )
    return None


# timm's ViT sizes by name: hidden, layers, heads, MLP width. C-RADIO's config names one of these.
_VIT_SIZES: dict[str, tuple[int, int, int, int]] = {
    "vit_small_patch16_224": (384, 12, 6, 1536),
    "vit_base_patch16_224": (768, 12, 12, 3072),
    "vit_large_patch16_224": (1024, 24, 16, 4096),
    "vit_huge_patch16_224": (1280, 32, 16, 5120),
}


@dataclass(frozen=True, slots=True)
class VisionSpec:
    """C-RADIO's ViT: sizes, token layout (class token + registers), position-embedding grid."""

    hidden: int
    layers: int
    heads: int
    mlp: int
    patch: int
    # Position embeddings are stored for a `cpe_max_size` square and resampled to the tile's grid.
    cpe_max_size: int
    cls_tokens: int
    registers: int
    qkv_bias: bool
    layer_norm_eps: float
    # Layer scale where the checkpoint stores none (timm's default for C-RADIO is no layer scale: 1.0).
    layer_scale: float

    @property
    def skipped_tokens(self) -> int:
        """Tokens before the patches (class tokens and registers) that the projector never sees."""
        return self.cls_tokens + self.registers


@dataclass(frozen=True, slots=True)
class DynamicResolution:
    """Images resized whole to between `min_patches` and `max_patches` patches (`vision_config.args`)."""

    min_patches: int
    max_patches: int  # 0: no cap


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """The whole model: language-model config (for transformers' NemotronHConfig), vision, glue."""

    path: Path
    llm_config: dict[str, Any]
    vision: VisionSpec
    tile_size: int
    downsample_ratio: float
    vit_hidden: int
    projector_hidden: int
    norm_mean: tuple[float, float, float]
    norm_std: tuple[float, float, float]
    use_thumbnail: bool
    image_token_id: int
    dtype: str
    architecture: str = ARCHITECTURE
    # None: the fixed tiles of Nemotron-Nano-VL-v2.
    dynamic: DynamicResolution | None = None

    @property
    def is_omni(self) -> bool:
        """A Nemotron-3-Nano-Omni checkpoint (Holotron-3-Nano), not a Nemotron-Nano-VL-v2 one (Holotron-12B)."""
        return self.architecture == OMNI_ARCHITECTURE

    @property
    def shuffle_factor(self) -> int:
        """How many patches per side fold into one image token (2 for pixel shuffle 0.5)."""
        return round(1 / self.downsample_ratio)

    @property
    def tokens_per_tile(self) -> int:
        side = self.tile_size // self.vision.patch // self.shuffle_factor
        return side * side

    @property
    def hidden(self) -> int:
        return int(self.llm_config["hidden_size"])

    @property
    def vocab_size(self) -> int:
        return int(self.llm_config["vocab_size"])


def _triple(values: Any, key: str) -> tuple[float, float, float]:
    if not isinstance(values, list | tuple) or len(values) != 3:
        raise ModelLoadError(f"config.json: {key} must be three numbers, got {values!r}")
    return (float(values[0]), float(values[1]), float(values[2]))


def _require(mapping: dict[str, Any], key: str, where: str) -> Any:
    if key not in mapping:
        raise ModelLoadError(f"config.json: {where} has no {key!r}")
    return mapping[key]


def _vision_spec(config: dict[str, Any]) -> VisionSpec:
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        raise ModelLoadError("config.json has no vision_config")
    args = vision.get("args") or {}
    if not isinstance(args, dict):
        raise ModelLoadError("config.json: vision_config.args must be an object")
    name = args.get("model")
    defaults = _VIT_SIZES.get(name) if isinstance(name, str) else None
    sizes: list[int] = []
    for index, key in enumerate(("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")):
        value = args.get(key, defaults[index] if defaults else None)
        if not isinstance(value, int):
            raise ModelLoadError(f"config.json: vision_config.args names no known ViT ({name!r}) and no {key}")
        sizes.append(value)
    hidden, layers, heads, mlp = sizes
    if hidden % heads:
        raise ModelLoadError(f"config.json: vision hidden size {hidden} is not a multiple of {heads} heads")
    if args.get("hidden_act", "gelu") != "gelu" or args.get("norm_type", "layer_norm") != "layer_norm":
        raise ModelLoadError("config.json: the vision tower must be a GELU / LayerNorm ViT (C-RADIO)")
    if args.get("qk_normalization", False):
        raise ModelLoadError("config.json: vision qk_normalization is not supported")
    teachers = args.get("teachers") or []
    cls_tokens = len({t["name"] for t in teachers}) if args.get("cls_token_per_teacher") else 1
    multiple = args.get("register_multiple")
    # vLLM's RADIO pads the class tokens with registers up to register_multiple and never reads num_registers.
    registers = multiple - cls_tokens % multiple if multiple else 0
    if args.get("num_registers") and args["num_registers"] != registers:
        raise ModelLoadError(
            f"config.json: vision_config.args.num_registers is {args['num_registers']}, but vLLM's RADIO reads only"
            f" register_multiple ({multiple}), which gives {registers}: the two would place the patches differently"
        )
    return VisionSpec(
        hidden=hidden,
        layers=layers,
        heads=heads,
        mlp=mlp,
        patch=int(vision.get("patch_size", 16)),
        cpe_max_size=int(args.get("cpe_max_size", 2048)),
        cls_tokens=cls_tokens,
        registers=int(registers),
        qkv_bias=bool(args.get("qkv_bias", True)),
        layer_norm_eps=float(args.get("layer_norm_eps", 1e-6)),
        layer_scale=float(args.get("initializer_factor", 1.0)),
    )


def read_spec(path: str | Path) -> ModelSpec:
    """Read and check `path/config.json`; ModelLoadError names the first thing that does not fit."""
    problem = transformers_problem()
    if problem:
        raise ModelLoadError(problem)
    root = Path(path)
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"cannot read {root / 'config.json'}: {exc}") from exc
    architectures = config.get("architectures") or []
    known = [name for name in ARCHITECTURES if name in architectures]
    if not known:
        raise ModelLoadError(
            f"{root} is not a Nemotron-Nano-VL-v2 checkpoint nor a Nemotron-3-Nano-Omni one (architectures"
            f" {architectures}, expected {' or '.join(ARCHITECTURES)})"
        )
    llm = config.get("llm_config") or config.get("text_config")
    if not isinstance(llm, dict):
        raise ModelLoadError("config.json has neither llm_config nor text_config")
    if llm.get("num_nextn_predict_layers"):
        raise ModelLoadError("config.json: a language model with multi-token-prediction layers is not supported")
    disagreement = config_problem(llm)
    if disagreement:
        raise ModelLoadError(disagreement)
    if config.get("ps_version", "v2") != "v2":
        raise ModelLoadError(f"config.json: pixel shuffle {config.get('ps_version')!r} is not supported (only v2)")
    image_token = config.get("img_context_token_id", config.get("image_context_token_id"))
    if not isinstance(image_token, int):
        raise ModelLoadError("config.json names no image token (img_context_token_id)")
    vision = _vision_spec(config)
    tile = int(config.get("force_image_size", 512))
    ratio = float(_require(config, "downsample_ratio", "the top level"))
    factor = round(1 / ratio)
    if (tile // vision.patch) % factor:
        raise ModelLoadError(f"config.json: a {tile}-pixel tile does not fold by {factor} (downsample {ratio})")
    dynamic = _dynamic_resolution(config, factor)
    return ModelSpec(
        path=root,
        llm_config=llm,
        vision=vision,
        tile_size=tile,
        downsample_ratio=ratio,
        vit_hidden=int(config.get("vit_hidden_size", vision.hidden)),
        projector_hidden=int(_require(config, "projector_hidden_size", "the top level")),
        norm_mean=_triple(config.get("norm_mean", (0.48145466, 0.4578275, 0.40821073)), "norm_mean"),
        norm_std=_triple(config.get("norm_std", (0.26862954, 0.26130258, 0.27577711)), "norm_std"),
        use_thumbnail=bool(config.get("use_thumbnail", True)),
        image_token_id=image_token,
        dtype=str(config.get("torch_dtype") or llm.get("torch_dtype") or "bfloat16"),
        architecture=known[0],
        dynamic=dynamic,
    )


def _dynamic_resolution(config: dict[str, Any], factor: int) -> DynamicResolution | None:
    """vLLM resizes images whole when `vision_config.args` names `min_num_patches` (whatever the architecture)."""
    args = config["vision_config"].get("args") or {}
    if "min_num_patches" not in args:
        return None
    low, high = args["min_num_patches"], args.get("max_num_patches", 0)
    if not isinstance(low, int) or not isinstance(high, int) or low < 1 or (high and high < low):
        raise ModelLoadError(
            f"config.json: vision_config.args min_num_patches {low!r} and max_num_patches {high!r} are not a range"
        )
    if factor != 2:  # vLLM's dynamic tiler asserts it
        raise ModelLoadError("config.json: dynamic-resolution images need pixel shuffle 0.5 (downsample_ratio)")
    return DynamicResolution(min_patches=low, max_patches=high)


def is_architecture(path: Path, architecture: str) -> bool:
    """Whether `path/config.json` names `architecture` (False when it cannot be read: read_spec says why)."""
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and architecture in (config.get("architectures") or [])


def weight_files(path: Path) -> list[Path]:
    """The safetensors files, from the index when there is one."""
    index = path / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError) as exc:
            raise ModelLoadError(f"cannot read {index}: {exc}") from exc
        files = [path / name for name in names]
    else:
        files = sorted(path.glob("*.safetensors"))
    missing = [f.name for f in files if not f.is_file()]
    if not files or missing:
        raise ModelLoadError(f"{path} lacks its weights ({', '.join(missing) or 'no *.safetensors file'})")
    return files


def tensor_shapes(path: Path) -> dict[str, list[int]]:
    """Every tensor's name and shape in the checkpoint at `path`, read from the safetensors headers (no weights)."""
    shapes: dict[str, list[int]] = {}
    for file in weight_files(path):
        try:
            with file.open("rb") as handle:
                (length,) = struct.unpack("<Q", handle.read(8))
                header = json.loads(handle.read(length))
            shapes.update((name, entry["shape"]) for name, entry in header.items() if name != "__metadata__")
        except (OSError, ValueError, struct.error, KeyError, TypeError, AttributeError) as exc:
            raise ModelLoadError(f"cannot read the header of {file}: {exc}") from exc
    return shapes
