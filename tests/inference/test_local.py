"""The in-process backend, run end to end on the tiny checkpoint through the trust_remote_code path."""

from __future__ import annotations

import logging
import re
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image, ImageDraw

from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference import tiling
from holodesk.inference.checkpoint import CheckpointLocation
from holodesk.inference.errors import BackendError, ModelLoadError, ParseError
from holodesk.inference.generation import Generation, TextGenerator
from holodesk.inference.hardware import GIB, CudaDevice, HardwareReport, KernelStatus, MambaPath, TorchStatus
from holodesk.inference.local import FastImageProcessor, LoadProgress, LocalBackend, kernels_in_use, plan_load
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest
from holodesk.inference.standin import IMAGE_TOKENS_PER_TILE, build_tiny_checkpoint

# A 1920x1080 screenshot with 12 tiles allowed: a 4x2 grid (closest aspect ratio) plus the thumbnail.
FULL_HD_TILES = 9


@pytest.fixture(scope="module")
def screenshot() -> Image.Image:
    """A desktop-like 1920x1080 image: a window with a title bar, a text field and a button."""
    image = Image.new("RGB", (1920, 1080), (32, 96, 160))
    draw = ImageDraw.Draw(image)
    draw.rectangle((300, 200, 1500, 900), fill=(240, 240, 240), outline=(0, 0, 0), width=2)
    draw.rectangle((300, 200, 1500, 240), fill=(60, 60, 70))
    draw.text((320, 210), "Mail - Inbox (3 unread)", fill=(255, 255, 255))
    draw.rectangle((340, 280, 1100, 320), fill=(255, 255, 255), outline=(120, 120, 120))
    draw.text((350, 292), "Search mail", fill=(128, 128, 128))
    draw.rounded_rectangle((1200, 820, 1460, 870), radius=8, fill=(30, 120, 220))
    draw.text((1290, 838), "Archive", fill=(255, 255, 255))
    return image


def desktop_frame(image: Image.Image) -> ScreenFrame:
    """`image` as a capture of a desktop of its size (BGRA, as mss gives it)."""
    rgb = np.asarray(image)
    bgra = np.concatenate([rgb[:, :, ::-1], np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=2)
    return ScreenFrame(
        pixels=np.ascontiguousarray(bgra),
        region=Rect(0, 0, image.width, image.height),
        monitor=None,
        monitors=(),
        captured_at=time.monotonic(),
    )


def navigation_request(image: Image.Image, max_new_tokens: int = 24) -> ChatRequest:
    """Shaped like a profile's request: system text, then the screenshot and the task in one user turn."""
    return ChatRequest(
        messages=[
            {"role": "system", "content": "You are a computer-use agent. Answer with one JSON action. /no_think"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "<observation>"},
                    {"type": "image"},
                    {"type": "text", "text": "</observation>\nTask: archive every unread newsletter."},
                ],
            },
        ],
        images=[image],
        max_new_tokens=max_new_tokens,
    )


@pytest.fixture(scope="module")
def stock_backend(tiny_checkpoint: Path) -> Iterator[LocalBackend]:
    """The tiny checkpoint as `tiny_backend` loads it, but tiling with the processor's own PIL code."""
    backend = LocalBackend(tiny_checkpoint, device="cpu", max_tiles=12, fast_tiling=False)
    backend.load()
    yield backend
    backend.unload()


def history_request(images: list[Image.Image], max_new_tokens: int) -> ChatRequest:
    """Shaped like a step with earlier screenshots kept: one placeholder per image, oldest first."""
    content: list[dict[str, Any]] = []
    for index, _ in enumerate(images):
        content += [{"type": "text", "text": f"<observation step={index}>"}, {"type": "image"}]
    content.append({"type": "text", "text": "Task: archive every unread newsletter. /no_think"})
    return ChatRequest(messages=[{"role": "user", "content": content}], images=images, max_new_tokens=max_new_tokens)


def image_token_id(backend: LocalBackend) -> int:
    return int(backend._loaded.tokenizer.convert_tokens_to_ids("<image>"))  # type: ignore[union-attr]


def test_the_backend_is_a_text_generator(tiny_backend: LocalBackend) -> None:
    assert isinstance(tiny_backend, TextGenerator)
    assert tiny_backend.is_loaded


def test_generate_on_a_screenshot_reports_tokens_and_timings(
    tiny_backend: LocalBackend, screenshot: Image.Image
) -> None:
    result = tiny_backend.generate_detailed(navigation_request(screenshot, max_new_tokens=24))
    timings = result.timings
    image_tokens = result.prompt_token_ids.count(image_token_id(tiny_backend))
    assert image_tokens == FULL_HD_TILES * IMAGE_TOKENS_PER_TILE
    # The rest of the prompt is the chat template's text: a few dozen tokens, not thousands.
    assert timings.tokens_in == len(result.prompt_token_ids)
    assert 20 < timings.tokens_in - image_tokens < 120
    assert 1 <= timings.tokens_out <= 24
    assert timings.tokens_out == len(result.new_token_ids)
    assert min(timings.preprocess_s, timings.prefill_s, timings.decode_s) > 0
    assert timings.total_s >= timings.preprocess_s + timings.prefill_s + timings.decode_s
    # Prefill runs the vision tower over 9 tiles and ~2,300 tokens; one decode step is far cheaper.
    assert timings.prefill_s > timings.decode_s / max(timings.tokens_out, 1)
    generation = tiny_backend.generate(navigation_request(screenshot, max_new_tokens=24))
    assert isinstance(generation, Generation)
    assert generation.text == result.text


def test_prompt_is_built_with_the_chat_template(tiny_backend: LocalBackend, screenshot: Image.Image) -> None:
    result = tiny_backend.generate_detailed(navigation_request(screenshot, max_new_tokens=1))
    tokenizer = tiny_backend._loaded.tokenizer  # type: ignore[union-attr]
    prompt = tokenizer.decode(list(result.prompt_token_ids))
    assert prompt.startswith("<SPECIAL_10>System\nYou are a computer-use agent. Answer with one JSON action.\n")
    assert "<SPECIAL_11>User\n<observation><img><image>" in prompt
    assert "</img></observation>\nTask: archive" in prompt
    assert prompt.endswith("<SPECIAL_11>Assistant\n<think></think>")  # /no_think reached the template


def test_the_tile_budget_changes_the_image_tokens(
    tiny_backend: LocalBackend, tiny_checkpoint: Path, screenshot: Image.Image
) -> None:
    request = navigation_request(screenshot, max_new_tokens=1)
    full = tiny_backend.generate_detailed(request)
    single_tile = LocalBackend(tiny_checkpoint, device="cpu", max_tiles=1)  # the profile's budget, at load
    single_tile.load()
    try:
        assert single_tile._loaded.processor.image_processor.max_num_tiles == 1  # type: ignore[union-attr]
        # The fast tiler read the same limit: otherwise it would still cut (and announce) 9 tiles.
        assert single_tile._loaded.fast_image_processor.spec.max_tiles == 1  # type: ignore[union-attr]
        single = single_tile.generate_detailed(request)
    finally:
        single_tile.unload()
    assert single.prompt_token_ids.count(image_token_id(tiny_backend)) == IMAGE_TOKENS_PER_TILE
    assert full.timings.tokens_in - single.timings.tokens_in == (FULL_HD_TILES - 1) * IMAGE_TOKENS_PER_TILE


def test_greedy_decoding_is_deterministic_and_picks_the_argmax(
    tiny_backend: LocalBackend, screenshot: Image.Image
) -> None:
    request = navigation_request(screenshot, max_new_tokens=8)
    first = tiny_backend.generate_detailed(request)
    second = tiny_backend.generate_detailed(request)
    assert first.new_token_ids == second.new_token_ids and first.text == second.text
    # The first answer token is the argmax of one full forward pass over the same prompt and pixels,
    # so the prompt, the image features and greedy decoding all went where they should.
    loaded = tiny_backend._loaded
    assert loaded is not None
    inputs = loaded.processor(
        text=[loaded.processor.tokenizer.decode(list(first.prompt_token_ids))], return_tensors="pt"
    )
    assert tuple(inputs["input_ids"][0].tolist()) == first.prompt_token_ids
    pixels = loaded.processor.image_processor(screenshot, return_tensors="pt")["pixel_values"]
    with torch.inference_mode():
        logits = loaded.model(input_ids=inputs["input_ids"], pixel_values=pixels).logits
    assert int(logits[0, -1].argmax()) == first.new_token_ids[0]


def test_loading_runs_off_the_caller_thread_and_reports_progress(
    tiny_checkpoint: Path, screenshot: Image.Image, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()
    seen: list[tuple[LoadProgress, str]] = []

    def progress(step: LoadProgress) -> None:
        seen.append((step, threading.current_thread().name))
        release.wait(timeout=30)  # holds the loader until the caller has its future back

    backend = LocalBackend(tiny_checkpoint, device="cpu")
    with caplog.at_level(logging.WARNING, logger="holodesk.inference.local"):
        future = backend.load_async(progress)
        assert not future.done() and not backend.is_loaded
        assert backend.load_async() is future  # loading happens once
        release.set()
        # generate waits for the load in progress instead of failing.
        generation = backend.generate(navigation_request(screenshot, max_new_tokens=2))
    assert future.done() and future.exception() is None and backend.is_loaded
    assert generation.timings.tokens_out >= 1
    stages = [step.stage for step, _ in seen]
    assert stages[0] == "locating" and stages[-1] == "ready"
    assert {"checking", "processor", "weights"} <= set(stages)
    fractions = [step.fraction for step, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {thread for _, thread in seen} == {"holodesk-model-load"}
    # The stand-in on the CPU is said once in the log and kept on the backend.
    assert backend.load_notice is not None and "stand-in" in backend.load_notice
    assert any(record.getMessage() == backend.load_notice for record in caplog.records)
    assert backend.load_seconds is not None and backend.load_seconds > 0
    backend.unload()


def test_generate_before_loading_says_so(tiny_checkpoint: Path, screenshot: Image.Image) -> None:
    backend = LocalBackend(tiny_checkpoint, device="cpu")
    with pytest.raises(BackendError, match=r"not loaded: start loading it with load_async\(\)"):
        backend.generate(navigation_request(screenshot))


def test_a_missing_checkpoint_fails_the_load_clearly(tmp_path: Path, screenshot: Image.Image) -> None:
    backend = LocalBackend(tmp_path / "no-such-model", device="cpu")
    error = backend.load_async().exception(timeout=30)
    assert isinstance(error, ModelLoadError)
    assert str(tmp_path / "no-such-model") in str(error) and "hf download" in str(error)
    with pytest.raises(ModelLoadError, match="No model directory"):
        backend.generate(navigation_request(screenshot))


def test_a_failed_load_can_be_retried(tmp_path: Path, tiny_checkpoint: Path) -> None:
    target = tmp_path / f"retry_{tiny_checkpoint.name}"  # a fresh folder name: remote code is imported by it
    backend = LocalBackend(target, device="cpu")
    failed = backend.load_async()
    assert isinstance(failed.exception(timeout=30), ModelLoadError)
    shutil.copytree(tiny_checkpoint, target)  # the user fetched the weights meanwhile
    retried = backend.load_async()
    assert retried is not failed
    assert retried.result(timeout=60) is None and backend.is_loaded
    assert backend.load_async() is retried  # a successful load is not repeated
    backend.unload()


def test_bad_options_are_refused_up_front(tiny_checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="unknown dtype 'fp8'"):
        LocalBackend(tiny_checkpoint, device="cpu", dtype="fp8")
    with pytest.raises(ModelLoadError, match="unknown device 'tpu'"):
        LocalBackend(tiny_checkpoint, device="tpu")
    with pytest.raises(ValueError, match="max_tiles must be at least 1"):
        LocalBackend(tiny_checkpoint, device="cpu", max_tiles=0)


def fake_report(*devices: CudaDevice, kernels_ok: bool = False) -> HardwareReport:
    kernels = (
        KernelStatus("mamba-ssm", "2.2.5", kernels_ok, None if kernels_ok else "ImportError: libcudart"),
        KernelStatus("causal-conv1d", "1.5.2", kernels_ok, None if kernels_ok else "ImportError: libcudart"),
    )
    path = MambaPath.CPU if not devices else (MambaPath.FAST_CUDA if kernels_ok else MambaPath.SLOW_TORCH)
    return HardwareReport(TorchStatus("2.13.0", "12.8"), devices, kernels, path, "faked")


def holotron_sized(tmp_path: Path) -> CheckpointLocation:
    (tmp_path / "config.json").write_text('{"torch_dtype": "bfloat16"}')
    return CheckpointLocation(path=tmp_path, source="directory", weight_bytes=24_600_000_000)


def test_a_gpu_without_room_is_refused_with_numbers(tmp_path: Path) -> None:
    small = CudaDevice(0, "NVIDIA RTX 4090", total_bytes=24 * GIB, free_bytes=int(22.5 * GIB), capability=(8, 9))
    with pytest.raises(ModelLoadError) as caught:
        plan_load(holotron_sized(tmp_path), "cuda", None, fake_report(small, kernels_ok=True))
    message = str(caught.value)
    assert "does not fit on cuda:0 (NVIDIA RTX 4090)" in message
    assert "22.9 GiB of bfloat16 weights" in message and "22.5 GiB of 24.0 GiB is free" in message


def test_a_gpu_with_room_gets_a_plan_and_a_warning_without_kernels(tmp_path: Path) -> None:
    big = CudaDevice(0, "NVIDIA A100-SXM4-80GB", total_bytes=80 * GIB, free_bytes=79 * GIB, capability=(8, 0))
    fast = plan_load(holotron_sized(tmp_path), "cuda:0", None, fake_report(big, kernels_ok=True))
    assert (fast.device, fast.dtype, fast.mamba_path, fast.notice) == (
        "cuda:0",
        "bfloat16",
        MambaPath.FAST_CUDA,
        None,
    )
    assert fast.required_bytes is not None and 24_600_000_000 < fast.required_bytes < 79 * GIB
    slow = plan_load(holotron_sized(tmp_path), "cuda", None, fake_report(big, kernels_ok=False))
    assert slow.mamba_path is MambaPath.SLOW_TORCH
    assert slow.notice is not None and "PyTorch scan on the GPU (slower)" in slow.notice
    assert "fallback" not in slow.notice
    # float32 doubles the bf16 checkpoint: 49 GB of weights still fit in 79 GiB.
    wide = plan_load(holotron_sized(tmp_path), "cuda", "float32", fake_report(big, kernels_ok=True))
    assert wide.required_bytes is not None and wide.required_bytes > 2 * 24_600_000_000


def test_an_older_gpu_keeps_bfloat16_with_a_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    volta = CudaDevice(0, "Tesla V100-SXM2-32GB", total_bytes=80 * GIB, free_bytes=79 * GIB, capability=(7, 0))
    with caplog.at_level(logging.WARNING, logger="holodesk.inference.load_plan"):
        plan = plan_load(holotron_sized(tmp_path), "cuda", None, fake_report(volta))
    assert plan.dtype == "bfloat16"
    assert "cuda:0 (Tesla V100-SXM2-32GB) predates Ampere" in caplog.text
    assert plan_load(holotron_sized(tmp_path), "cuda", "float16", fake_report(volta)).dtype == "float16"


def test_only_the_stand_in_runs_on_the_cpu(tmp_path: Path, tiny_checkpoint: Path) -> None:
    with pytest.raises(ModelLoadError, match="only the tiny test stand-in runs on the CPU"):
        plan_load(holotron_sized(tmp_path), "cpu", None, fake_report())
    standin = CheckpointLocation(path=tiny_checkpoint, source="directory", weight_bytes=1)
    cpu = plan_load(standin, "cpu", None, fake_report())
    assert (cpu.device, cpu.dtype, cpu.mamba_path, cpu.attention) == ("cpu", "bfloat16", MambaPath.CPU, "sdpa")
    assert cpu.required_bytes is None and cpu.notice is not None and "stand-in" in cpu.notice
    with pytest.raises(ModelLoadError, match="unknown dtype 'int8'"):
        plan_load(standin, "cpu", "int8", fake_report())


def test_no_gpu_or_a_wrong_index_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="No CUDA GPU to load the model on"):
        plan_load(holotron_sized(tmp_path), "cuda", None, fake_report())
    gpu = CudaDevice(0, "NVIDIA L40S", total_bytes=48 * GIB, free_bytes=47 * GIB, capability=(8, 9))
    with pytest.raises(ModelLoadError, match=r"There is no cuda:1; this machine has cuda:0 \(NVIDIA L40S\)"):
        plan_load(holotron_sized(tmp_path), "cuda:1", None, fake_report(gpu))
    with pytest.raises(ModelLoadError, match="unknown device 'gpu'"):
        plan_load(holotron_sized(tmp_path), "gpu", None, fake_report(gpu))


def test_the_memory_check_runs_before_any_weights_load(tiny_checkpoint: Path) -> None:
    """With a faked GPU too small even for the tiny model, loading stops at the check (no CUDA is touched)."""
    tight = CudaDevice(0, "Faked GPU", total_bytes=4 * GIB, free_bytes=GIB, capability=(8, 6))
    backend = LocalBackend(tiny_checkpoint, device="cuda", hardware_probe=lambda: fake_report(tight))
    stages: list[str] = []
    error = backend.load_async(lambda step: stages.append(step.stage)).exception(timeout=30)
    assert isinstance(error, ModelLoadError) and "does not fit on cuda:0 (Faked GPU)" in str(error)
    assert stages == ["locating", "checking"]
    assert not backend.is_loaded


def test_one_generate_runs_at_a_time(tiny_backend: LocalBackend, screenshot: Image.Image) -> None:
    loaded = tiny_backend._loaded
    assert loaded is not None
    original = loaded.model.generate
    active = 0
    most_active = 0
    counter_lock = threading.Lock()

    def counting_generate(*args: Any, **kwargs: Any) -> Any:
        nonlocal active, most_active
        with counter_lock:
            active += 1
            most_active = max(most_active, active)
        try:
            time.sleep(0.05)  # widen the window in which an unguarded second call would overlap
            return original(*args, **kwargs)
        finally:
            with counter_lock:
                active -= 1

    loaded.model.generate = counting_generate
    texts: list[str] = []
    try:
        request = navigation_request(screenshot, max_new_tokens=4)
        threads = [threading.Thread(target=lambda: texts.append(tiny_backend.generate(request).text)) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
    finally:
        del loaded.model.generate  # back to the class's method
    assert len(texts) == 3 and len(set(texts)) == 1
    assert most_active == 1


def test_kernels_in_use_reads_the_layers_flag_and_device(tiny_backend: LocalBackend) -> None:
    # The stand-in's Mamba layers on the CPU: the fast path is off whatever the flag says.
    assert kernels_in_use(tiny_backend._loaded.model) is False  # type: ignore[union-attr]
    assert kernels_in_use(torch.nn.Linear(2, 2)) is None


def test_unloading_frees_the_model_and_generate_says_so(tiny_checkpoint: Path, screenshot: Image.Image) -> None:
    backend = LocalBackend(tiny_checkpoint, device="cpu")
    backend.load()
    assert backend.fast_tiling
    backend.unload()
    assert not backend.is_loaded
    assert (backend.fast_tiling, backend.fast_tiling_reason) == (False, "not loaded")
    with pytest.raises(BackendError, match="not loaded"):
        backend.generate(navigation_request(screenshot))


def test_a_holotron_step_on_the_tiny_model_is_a_parse_error_with_the_raw_text(
    tiny_backend: LocalBackend, screenshot: Image.Image
) -> None:
    """The whole navigation path: profile prompt -> local backend -> parser. Random weights answer noise."""
    policy = ModelPolicy(get_profile("holotron"), tiny_backend)
    with pytest.raises(ParseError) as caught:
        policy.propose("Archive every unread newsletter.", [], [desktop_frame(screenshot)])
    error = caught.value
    assert isinstance(error.raw_text, str) and error.raw_text
    assert isinstance(error.timings, StepTimings)
    assert error.timings.tokens_in > FULL_HD_TILES * IMAGE_TOKENS_PER_TILE
    assert 1 <= error.timings.tokens_out <= 2 * 512  # the answer and the one retry


def test_a_holotron_step_from_a_checkpoint_taught_an_answer_is_parsed_into_that_action(
    tmp_path: Path, screenshot: Image.Image
) -> None:
    """The same path with weights set so greedy decoding writes a chosen step: it comes out parsed."""
    answer = (
        '{"note": "", "thought": "The search field is on the left.", '
        '"action": {"name": "click_desktop", "x": 263, "y": 741}}'
    )
    backend = LocalBackend(build_tiny_checkpoint(tmp_path, answer=answer), device="cpu")
    backend.load()
    try:
        proposal = ModelPolicy(get_profile("holotron"), backend).propose(
            "Archive every unread newsletter.", [], [desktop_frame(screenshot)]
        )
    finally:
        backend.unload()
    assert proposal.raw_text == answer
    assert proposal.rejected == ()  # right the first time: no retry
    assert proposal.action == Click(Point(263, 741))
    assert proposal.thought == "The search field is on the left."
    assert proposal.timings.tokens_in > FULL_HD_TILES * IMAGE_TOKENS_PER_TILE  # the screenshot went through
    assert proposal.timings.tokens_out <= 2  # the answer's one token, then the end of turn


# -- fast tiling: inference.tiling in place of the processor's PIL tiling ---------------------------


def test_the_fast_tiling_path_is_chosen_on_the_tiny_checkpoint(
    tiny_backend: LocalBackend, stock_backend: LocalBackend
) -> None:
    assert tiny_backend.fast_tiling is True
    assert tiny_backend.fast_tiling_reason.startswith("on: same ")
    assert "prompt tokens as the processor on the probe images" in tiny_backend.fast_tiling_reason
    assert stock_backend.fast_tiling is False
    assert stock_backend.fast_tiling_reason == "off: fast_tiling=False was asked for"
    # The stock processor is untouched: the adapter sits in a copy of it.
    loaded = tiny_backend._loaded
    assert loaded is not None and loaded.fast_processor is not loaded.processor
    assert isinstance(loaded.fast_processor.image_processor, FastImageProcessor)
    assert not isinstance(loaded.processor.image_processor, FastImageProcessor)


def test_fast_tiling_gives_the_prompt_and_answer_of_the_stock_processor(
    tiny_backend: LocalBackend, stock_backend: LocalBackend, screenshot: Image.Image
) -> None:
    request = navigation_request(screenshot, max_new_tokens=16)
    fast = tiny_backend.generate_detailed(request)
    stock = stock_backend.generate_detailed(request)
    assert fast.prompt_token_ids == stock.prompt_token_ids
    assert fast.new_token_ids == stock.new_token_ids and fast.text == stock.text
    # Three screenshots of different sizes, as a step with history sends: each image's tiles stay in
    # order and expand its own placeholder (4x2, 2x1 and 1x2 grids, each with a thumbnail).
    images = [screenshot, screenshot.resize((960, 540)), screenshot.crop((1000, 0, 1500, 1000))]
    fast_history = tiny_backend.generate_detailed(history_request(images, max_new_tokens=8))
    stock_history = stock_backend.generate_detailed(history_request(images, max_new_tokens=8))
    assert fast_history.prompt_token_ids == stock_history.prompt_token_ids
    assert fast_history.prompt_token_ids.count(image_token_id(tiny_backend)) == (9 + 3 + 3) * IMAGE_TOKENS_PER_TILE
    assert fast_history.new_token_ids == stock_history.new_token_ids


def test_fast_tiling_never_calls_the_processors_pil_tiling(
    tiny_backend: LocalBackend, stock_backend: LocalBackend, screenshot: Image.Image, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        calls.append("fast backend")
        raise AssertionError("the processor's PIL tiling ran on the fast path")

    stock_image_processor = stock_backend._loaded.processor.image_processor  # type: ignore[union-attr]
    original = stock_image_processor.preprocess

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append("stock backend")
        return original(*args, **kwargs)

    monkeypatch.setattr(tiny_backend._loaded.processor.image_processor, "preprocess", refuse)  # type: ignore[union-attr]
    monkeypatch.setattr(stock_image_processor, "preprocess", counting)
    request = navigation_request(screenshot, max_new_tokens=2)
    fast = tiny_backend.generate_detailed(request)
    stock = stock_backend.generate_detailed(request)
    assert calls == ["stock backend"]
    assert fast.prompt_token_ids == stock.prompt_token_ids


def _shift_three_grey_levels(original: Any) -> Any:
    """fast_tiles with every value 3 grey levels too bright: one more than the probe allows."""
    shift = torch.tensor([3 / (255 * std) for std in tiling.CLIP_STD]).view(1, 3, 1, 1)

    def shifted(*args: Any, **kwargs: Any) -> torch.Tensor:
        return original(*args, **kwargs).add_(shift)

    return shifted


def _one_tile_per_image(original: Any) -> Any:
    """choose_grid always answering one tile: the fast path would send fewer tiles than the processor."""
    return lambda *args, **kwargs: tiling.TileGrid(1, 1, False)


def _failing(original: Any) -> Any:
    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("no tiles today")

    return fail


@pytest.mark.parametrize(
    ("function", "breakage", "reason"),
    [
        # 3 levels, 4 where the fast path already was a level brighter than the processor.
        ("fast_tiles", _shift_three_grey_levels, r"tiles differ from the processor's by up to [34]\.\d grey levels"),
        ("choose_grid", _one_tile_per_image, "input_ids differ from the processor's"),
        ("fast_tiles", _failing, "the probe failed: RuntimeError: no tiles today"),
    ],
    ids=["wrong pixels", "wrong tile count", "fast path raises"],
)
def test_a_fast_path_that_disagrees_falls_back_to_the_processor(
    tiny_checkpoint: Path,
    screenshot: Image.Image,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    function: str,
    breakage: Any,
    reason: str,
) -> None:
    monkeypatch.setattr(tiling, function, breakage(getattr(tiling, function)))
    backend = LocalBackend(tiny_checkpoint, device="cpu")
    with caplog.at_level(logging.WARNING, logger="holodesk.inference.local"):
        backend.load()
    try:
        assert backend.fast_tiling is False
        assert backend.fast_tiling_reason.startswith("off: ") and re.search(reason, backend.fast_tiling_reason)
        assert "fast image tiling is off" in caplog.text and re.search(reason, caplog.text)
        assert backend._loaded is not None and backend._loaded.fast_processor is None
        # The stock path still serves requests, with the right image tokens.
        result = backend.generate_detailed(navigation_request(screenshot, max_new_tokens=1))
        assert result.prompt_token_ids.count(image_token_id(backend)) == FULL_HD_TILES * IMAGE_TOKENS_PER_TILE
    finally:
        backend.unload()


def test_the_device_tiling_path_passes_the_probe_and_serves_requests(
    tiny_checkpoint: Path, tiny_backend: LocalBackend, screenshot: Image.Image
) -> None:
    """What a CUDA load does (upload the uint8 image, tile there), run on the CPU through the same code."""
    backend = LocalBackend(tiny_checkpoint, device="cpu", max_tiles=12, tiling_device="cpu")
    backend.load()
    try:
        assert backend.fast_tiling, backend.fast_tiling_reason
        adapter = backend._loaded.fast_image_processor  # type: ignore[union-attr]
        assert adapter is not None and adapter.device == "cpu"
        assert tiny_backend._loaded.fast_image_processor.device is None  # type: ignore[union-attr]
        request = navigation_request(screenshot, max_new_tokens=1)
        device_path = backend.generate_detailed(request)
        assert device_path.prompt_token_ids == tiny_backend.generate_detailed(request).prompt_token_ids
    finally:
        backend.unload()


def test_the_fast_image_processor_answers_like_the_stock_one(tiny_backend: LocalBackend) -> None:
    stock = tiny_backend._loaded.processor.image_processor  # type: ignore[union-attr]
    adapter = FastImageProcessor(stock, torch.bfloat16)
    assert adapter.image_size == stock.image_size and adapter.patch_size == stock.patch_size  # read through
    images = [Image.new("RGB", (1920, 1080), (10, 20, 30)), Image.new("L", (500, 500), 128)]
    out = adapter([images])  # a batch (list of lists) is flattened as the stock one would take it
    assert out["num_patches"].tolist() == [9, 1]
    assert out["pixel_values"].shape == (10, 3, 512, 512) and out["pixel_values"].dtype == torch.bfloat16
    expected = stock(images, return_tensors="pt")
    assert out["num_patches"].tolist() == expected["num_patches"].tolist()
    assert torch.allclose(out["pixel_values"].float(), expected["pixel_values"], atol=0.04)
    with pytest.raises(TypeError, match=r"does not take image processor arguments \['max_num_tiles'\]"):
        adapter(images, max_num_tiles=2)
    assert (adapter.fast_calls, adapter.stock_calls) == (1, 0)


def test_interrupt_stops_a_long_generation_at_the_next_token(tiny_backend):
    import threading

    from holodesk.inference.local import GenerationInterrupted
    from holodesk.inference.profiles.base import ChatRequest

    request = ChatRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
                          max_new_tokens=4000)  # fmt: skip
    outcome: list[object] = []

    def work() -> None:
        try:
            outcome.append(tiny_backend.generate_detailed(request))
        except GenerationInterrupted as exc:
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    time.sleep(0.5)
    stopped_at = time.monotonic()
    tiny_backend.interrupt()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome[0], GenerationInterrupted)
    assert time.monotonic() - stopped_at < 1.0  # one decode step, not the remaining thousands
    # A request made after the interrupt is not affected.
    short = ChatRequest(messages=request.messages, max_new_tokens=4)
    assert len(tiny_backend.generate_detailed(short).new_token_ids) <= 4
