"""Which models `holodesk setup` offers and recommends, from memory_guide's plans at their real shapes."""

from __future__ import annotations

from holodesk.app.setup.catalog import find_model, offers
from holodesk.inference.hardware import CudaDevice
from holodesk.inference.memory_guide import DESKTOP_RESERVE, GIB, fits


def ram_need(name: str) -> int:
    return next(f.ram_bytes for f in fits() if f.model.name == name) + DESKTOP_RESERVE


def gpu_need(name: str) -> int:
    return next(f.gpu_bytes for f in fits() if f.model.name == name)


def gpu(total: int) -> CudaDevice:
    return CudaDevice(index=0, name="Test GPU", total_bytes=total, free_bytes=total, capability=(8, 9))


def test_a_laptop_without_a_gpu_gets_the_small_model_on_the_cpu_first() -> None:
    found = offers(ram_need("Holo3.1-0.8B"), ())
    assert [(o.model.key, o.device, o.fits, o.recommended) for o in found] == [
        ("holo3.1-0.8b", "cpu", True, True),
        ("holo3.1-4b", "cpu", False, False),
    ]


def test_a_machine_too_small_for_any_gets_no_recommendation() -> None:
    found = offers(ram_need("Holo3.1-0.8B") - 1, ())
    assert not any(o.fits or o.recommended for o in found)


def test_plenty_of_ram_still_recommends_the_small_one_on_the_cpu() -> None:
    found = offers(ram_need("Holo3.1-4B"), ())
    assert [(o.model.key, o.fits, o.recommended) for o in found] == [
        ("holo3.1-0.8b", True, True),
        ("holo3.1-4b", True, False),
    ]


def test_a_gpu_that_holds_the_larger_model_gets_it_on_the_gpu() -> None:
    found = offers(8 * GIB, (gpu(gpu_need("Holo3.1-4B")),))
    assert (found[0].model.key, found[0].device, found[0].recommended) == ("holo3.1-4b", "cuda", True)
    small = offers(8 * GIB, (gpu(gpu_need("Holo3.1-4B") - 1),))
    assert [(o.model.key, o.device) for o in small if o.recommended] == [("holo3.1-0.8b", "cuda")]


def test_models_are_found_by_key_repository_or_name() -> None:
    assert find_model("holo3.1-0.8b") == find_model("Hcompany/Holo-3.1-0.8B") == find_model("Holo3.1-0.8B")
    assert find_model("holo9") is None
