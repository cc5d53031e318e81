"""The in-process backend, run end to end on the tiny real-layout checkpoint through Holodesk's engine.

Loading (worker thread, progress, retries, refusals before any weight is read), one request at a
time, interruption, the state kept between steps, and the whole navigation path: a random model's
answer is a parse error with its text, a model taught one step (bench/nemotron_tiny/chosen_answer.py)
gives that step, parsed.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image, ImageDraw

from bench.nemotron_tiny import IMAGE_TOKENS_PER_TILE
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.engine.nemotron_decode import NemotronDecoder
from holodesk.inference.engine.placement import place
from holodesk.inference.engine.spec import read_spec
from holodesk.inference.errors import BackendError, ModelLoadError, ParseError
from holodesk.inference.generation import Generation, TextGenerator
from holodesk.inference.hardware import GIB, CudaDevice, HardwareReport, KernelStatus, MambaPath, TorchStatus
from holodesk.inference.local import GenerationInterrupted, LoadProgress, LocalBackend
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles import get_profile
from holodesk.inference.profiles.base import ChatRequest
from tests.conftest import TAUGHT_ANSWER

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


def history_request(images: list[Image.Image], max_new_tokens: int) -> ChatRequest:
    """Shaped like a step with earlier screenshots kept: one placeholder per image, oldest first."""
    content: list[dict[str, Any]] = []
    for index, _ in enumerate(images):
        content += [{"type": "text", "text": f"<observation step={index}>"}, {"type": "image"}]
    content.append({"type": "text", "text": "Task: archive every unread newsletter. /no_think"})
    return ChatRequest(messages=[{"role": "user", "content": content}], images=images, max_new_tokens=max_new_tokens)


def image_token_id(backend: LocalBackend) -> int:
    return int(backend.engine.tokenizer.convert_tokens_to_ids("<image>"))


def test_the_backend_is_a_text_generator(tiny_backend: LocalBackend) -> None:
    assert isinstance(tiny_backend, TextGenerator)
    assert tiny_backend.is_loaded


def test_generate_on_a_screenshot_reports_tokens_and_timings(
    tiny_backend: LocalBackend, screenshot: Image.Image
) -> None:
    tiny_backend.forget()
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
    assert (result.prefilled_tokens, result.reused_tokens) == (timings.tokens_in, 0)  # state forgotten above
    generation = tiny_backend.generate(navigation_request(screenshot, max_new_tokens=24))
    assert isinstance(generation, Generation)
    assert generation.text == result.text


def test_prompt_is_built_with_the_chat_template(tiny_backend: LocalBackend, screenshot: Image.Image) -> None:
    result = tiny_backend.generate_detailed(navigation_request(screenshot, max_new_tokens=1))
    prompt = tiny_backend.engine.tokenizer.decode(list(result.prompt_token_ids))
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
        single = single_tile.generate_detailed(request)
    finally:
        single_tile.unload()
    assert single.prompt_token_ids.count(image_token_id(tiny_backend)) == IMAGE_TOKENS_PER_TILE
    assert full.timings.tokens_in - single.timings.tokens_in == (FULL_HD_TILES - 1) * IMAGE_TOKENS_PER_TILE


def test_a_step_that_extends_the_last_prefills_only_what_was_added(
    tiny_backend: LocalBackend, tiny_checkpoint: Path, screenshot: Image.Image
) -> None:
    """The second step's prompt is the first's conversation plus a turn: the kept state serves the rest."""
    first = navigation_request(screenshot, max_new_tokens=4)
    second = ChatRequest(
        messages=[
            *first.messages,
            {"role": "assistant", "content": "I clicked the search field."},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Next step. /no_think"}]},
        ],
        images=[screenshot, screenshot.crop((0, 0, 960, 540))],
        max_new_tokens=8,
    )
    tiny_backend.forget()
    tiny_backend.generate_detailed(first)
    kept = tiny_backend.generate_detailed(second)
    assert kept.reused_tokens > FULL_HD_TILES * IMAGE_TOKENS_PER_TILE  # the first screenshot was not prefilled again
    assert kept.prefilled_tokens + kept.reused_tokens == len(kept.prompt_token_ids)
    fresh = LocalBackend(tiny_checkpoint, device="cpu", keep_state=False)
    fresh.load()
    try:
        fresh.generate_detailed(first)
        whole = fresh.generate_detailed(second)
    finally:
        fresh.unload()
    assert (whole.reused_tokens, whole.prefilled_tokens) == (0, len(whole.prompt_token_ids))
    assert whole.prompt_token_ids == kept.prompt_token_ids
    assert whole.new_token_ids == kept.new_token_ids  # the same answer from the kept state as from scratch


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
    assert stages == ["locating", "checking", "weights", "ready"]
    fractions = [step.fraction for step, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert {thread for _, thread in seen} == {"holodesk-model-load"}
    # Running on the CPU is said once in the log and kept on the backend.
    assert backend.load_notice is not None and "runs on the CPU" in backend.load_notice
    assert any(record.getMessage() == backend.load_notice for record in caplog.records)
    assert backend.load_seconds is not None and backend.load_seconds > 0
    assert backend.placement is not None and backend.placement.dtype == "float32"  # the checkpoint's own
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


def test_another_architecture_is_refused_before_loading(tiny_checkpoint: Path, tmp_path: Path) -> None:
    other = tmp_path / "llava"
    shutil.copytree(tiny_checkpoint, other)
    (other / "config.json").write_text('{"architectures": ["LlavaForConditionalGeneration"]}', encoding="utf-8")
    stages: list[str] = []
    error = LocalBackend(other, device="cpu").load_async(lambda s: stages.append(s.stage)).exception(timeout=30)
    assert isinstance(error, ModelLoadError) and "is not a Nemotron-Nano-VL-v2 checkpoint" in str(error)
    assert stages == ["locating", "checking"]


def test_a_failed_load_can_be_retried(tmp_path: Path, tiny_checkpoint: Path) -> None:
    target = tmp_path / "later"
    backend = LocalBackend(target, device="cpu")
    failed = backend.load_async()
    assert isinstance(failed.exception(timeout=30), ModelLoadError)
    shutil.copytree(tiny_checkpoint, target)  # the user fetched the weights meanwhile
    retried = backend.load_async()
    assert retried is not failed
    assert retried.result(timeout=120) is None and backend.is_loaded
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


def test_a_gpu_without_room_is_refused_with_the_memory_plans_numbers(tiny_checkpoint: Path) -> None:
    spec = read_spec(tiny_checkpoint)
    needed = place(spec, "cpu", None, fake_report()).memory.total
    small = CudaDevice(0, "Faked GPU", total_bytes=needed, free_bytes=needed - 1, capability=(8, 9))
    with pytest.raises(ModelLoadError) as caught:
        place(spec, "cuda", None, fake_report(small, kernels_ok=True))
    message = str(caught.value)
    assert "does not fit on cuda:0 (Faked GPU)" in message
    assert "weights" in message and "cache" in message and "prefill peak" in message
    roomy = CudaDevice(0, "Faked GPU", total_bytes=needed, free_bytes=needed, capability=(8, 9))
    fits = place(spec, "cuda", None, fake_report(roomy, kernels_ok=True))
    assert (fits.device, fits.dtype, fits.mamba_path, fits.notice) == ("cuda:0", "float32", MambaPath.FAST_CUDA, None)
    # A longer context needs a bigger cache: the same GPU is then too small.
    with pytest.raises(ModelLoadError, match="does not fit"):
        place(spec, "cuda", None, fake_report(roomy, kernels_ok=True), context=4 * 16384)


def test_a_gpu_without_kernels_or_before_ampere_gets_a_notice(tiny_checkpoint: Path) -> None:
    spec = read_spec(tiny_checkpoint)
    big = CudaDevice(0, "Tesla V100-SXM2-32GB", total_bytes=32 * GIB, free_bytes=31 * GIB, capability=(7, 0))
    plan = place(spec, "cuda:0", "bfloat16", fake_report(big, kernels_ok=False))
    assert plan.mamba_path is MambaPath.SLOW_TORCH and plan.notice is not None
    assert "PyTorch scan on the GPU (slower)" in plan.notice and "holodesk[cuda]" in plan.notice
    assert "predates Ampere" in plan.notice


def test_no_gpu_or_a_wrong_index_is_refused(tiny_checkpoint: Path) -> None:
    spec = read_spec(tiny_checkpoint)
    with pytest.raises(ModelLoadError, match="No CUDA GPU to load the model on"):
        place(spec, "cuda", None, fake_report())
    gpu = CudaDevice(0, "NVIDIA L40S", total_bytes=48 * GIB, free_bytes=47 * GIB, capability=(8, 9))
    with pytest.raises(ModelLoadError, match=r"There is no cuda:1; this machine has cuda:0 \(NVIDIA L40S\)"):
        place(spec, "cuda:1", None, fake_report(gpu))
    with pytest.raises(ModelLoadError, match=r"only 0\.0 GiB is available"):
        place(spec, "cpu", None, fake_report(), cpu_available=1)


def test_the_memory_check_runs_before_any_weights_load(tiny_checkpoint: Path) -> None:
    """With a faked GPU too small even for the tiny model, loading stops at the check (no CUDA is touched)."""
    tight = CudaDevice(0, "Faked GPU", total_bytes=4 * GIB, free_bytes=1024, capability=(8, 6))
    backend = LocalBackend(tiny_checkpoint, device="cuda", hardware_probe=lambda: fake_report(tight))
    stages: list[str] = []
    error = backend.load_async(lambda step: stages.append(step.stage)).exception(timeout=30)
    assert isinstance(error, ModelLoadError) and "does not fit on cuda:0 (Faked GPU)" in str(error)
    assert stages == ["locating", "checking"]
    assert not backend.is_loaded


def test_one_generate_runs_at_a_time(tiny_backend: LocalBackend, screenshot: Image.Image) -> None:
    engine = tiny_backend.engine
    original = engine.generate
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

    engine.generate = counting_generate  # type: ignore[method-assign]
    texts: list[str] = []
    try:
        request = navigation_request(screenshot, max_new_tokens=4)
        threads = [threading.Thread(target=lambda: texts.append(tiny_backend.generate(request).text)) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        del engine.generate  # back to the class's method
    assert len(texts) == 3 and len(set(texts)) == 1
    assert most_active == 1


def test_unloading_frees_the_model_and_generate_says_so(tiny_checkpoint: Path, screenshot: Image.Image) -> None:
    backend = LocalBackend(tiny_checkpoint, device="cpu")
    backend.load()
    backend.unload()
    assert not backend.is_loaded
    with pytest.raises(BackendError, match="not loaded"):
        backend.generate(navigation_request(screenshot))


def test_a_holotron_step_on_the_random_model_is_a_parse_error_with_the_raw_text(
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
    answering_checkpoint: Path, screenshot: Image.Image
) -> None:
    """The same path with weights set so greedy decoding writes a chosen step: it comes out parsed."""
    backend = LocalBackend(answering_checkpoint, device="cpu")
    backend.load()
    try:
        proposal = ModelPolicy(get_profile("holotron"), backend).propose(
            "Archive every unread newsletter.", [], [desktop_frame(screenshot)]
        )
    finally:
        backend.unload()
    assert proposal.raw_text == TAUGHT_ANSWER
    assert proposal.rejected == ()  # right the first time: no retry
    assert proposal.action == Click(Point(263, 741))
    assert proposal.thought == "The search field is on the left."
    assert proposal.timings.tokens_in > FULL_HD_TILES * IMAGE_TOKENS_PER_TILE  # the screenshot went through
    assert proposal.timings.tokens_out == 2  # the answer's one token, then the end of turn


def test_interrupt_stops_a_long_generation_at_the_next_token(
    tiny_backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first decode step is held until interrupt() was called; the loop then stops before the next token."""
    original = NemotronDecoder.forward
    decoding = threading.Event()
    interrupted = threading.Event()

    def held_forward(decoder: NemotronDecoder) -> Any:  # a decoded token (the engine's static decoder)
        decoding.set()
        interrupted.wait(timeout=30)
        return original(decoder)

    request = ChatRequest(messages=[{"role": "user", "content": [{"type": "text", "text": "hello"}]}],
                          max_new_tokens=4000)  # fmt: skip
    outcome: list[object] = []

    def work() -> None:
        try:
            outcome.append(tiny_backend.generate_detailed(request))
        except GenerationInterrupted as exc:
            outcome.append(exc)

    monkeypatch.setattr(NemotronDecoder, "forward", held_forward)
    thread = threading.Thread(target=work)
    thread.start()
    assert decoding.wait(timeout=120), "no decode step began"
    tiny_backend.interrupt()
    interrupted.set()
    thread.join(60)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], GenerationInterrupted), outcome
    # A request made after the interrupt is not affected.
    short = ChatRequest(messages=request.messages, max_new_tokens=4)
    assert 1 <= len(tiny_backend.generate_detailed(short).new_token_ids) <= 4
