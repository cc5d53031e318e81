"""Holodesk's commands against a real vLLM serving Holotron-12B's architecture (random weights).

Random weights score nothing; what is shown is that every request the remote backend sends is
accepted by the real server and every answer parses (the schemas' bounds and the server's
structured-output flags make that hold) or fails in words. Each command runs as a user runs it, in
its own process.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from PIL import Image, ImageDraw

from bench.rigs.vllm_server import VllmServer
from holodesk.automation.trajectory import iter_session_folders, read_session
from tests.support.holodesk_command import HOLODESK_COMMAND

pytestmark = pytest.mark.vllm


def holodesk(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HOLODESK_API_KEY": "", "PYTHONUNBUFFERED": "1", **(env or {})}
    return subprocess.run(
        [*HOLODESK_COMMAND, *args], input=stdin, capture_output=True, text=True, errors="replace",
        env=environment, timeout=timeout,
    )  # fmt: skip


def screenshot(path: Path, size: tuple[int, int] = (1280, 800)) -> Path:
    image = Image.new("RGB", size, (32, 96, 160))
    draw = ImageDraw.Draw(image)
    draw.rectangle((size[0] - 320, size[1] - 160, size[0] - 180, size[1] - 120), fill=(30, 120, 220))
    draw.text((size[0] - 276, size[1] - 148), "Archive", fill=(255, 255, 255))
    image.save(path)
    return path


def doctor_lines(output: str) -> dict[str, tuple[str, str]]:
    """Check name -> (status, the line)."""
    found: dict[str, tuple[str, str]] = {}
    for line in output.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("OK", "INFO", "WARN", "FAIL"):
            found.setdefault(rest.strip().split(":")[0], (status, line))
    return found


def settings_home(tmp_path: Path, max_steps: int) -> dict[str, str]:
    """An XDG_CONFIG_HOME whose settings file sets the step limit (doctor reads it from there)."""
    folder = tmp_path / "config" / "holodesk"
    folder.mkdir(parents=True)
    (folder / "settings.toml").write_text(f"version = 1\n[run]\nmax_steps = {max_steps}\n", encoding="utf-8")
    return {"XDG_CONFIG_HOME": str(tmp_path / "config")}


@pytest.mark.display
def test_doctor_try_runs_a_step_through_the_server_and_the_context_holds_a_task(
    xvfb, vllm_server: VllmServer, tmp_path
):
    result = holodesk(
        "doctor", "--backend", "remote", "--base-url", vllm_server.base_url, "--try", env=settings_home(tmp_path, 10)
    )
    checks = doctor_lines(result.stdout)
    assert checks["server"][0] == "OK", result.stdout + result.stderr
    assert checks["images"][0] == "OK"
    status, line = checks["context"]
    assert status == "OK" and f"{vllm_server.max_model_len:,} tokens" in line and "10-step task" in line, line
    status, line = checks["try"]
    assert status == "OK", line  # the answer parsed: a step was proposed
    assert "proposed:" in line and "tokens in" in line
    assert result.returncode == 0 and result.stdout.rstrip().endswith("ready (backend remote)")


@pytest.mark.display
def test_doctor_names_the_context_a_long_task_needs(xvfb, vllm_server: VllmServer, tmp_path):
    """The server counts the last step's prompt of a 120-step task: more than its context, and doctor says so."""
    result = holodesk(
        "doctor", "--backend", "remote", "--base-url", vllm_server.base_url, env=settings_home(tmp_path, 120)
    )
    status, line = doctor_lines(result.stdout)["context"]
    assert status == "FAIL", result.stdout
    assert f"the model's context is {vllm_server.max_model_len:,} tokens" in line
    fix = result.stdout.split(line, 1)[1].splitlines()[1]
    suggested = int(fix.split("--max-model-len ")[1].split()[0])
    needed = int(line.split("needs ")[1].split(" tokens")[0].replace(",", ""))
    assert suggested >= needed > vllm_server.max_model_len
    assert result.returncode == 1


@pytest.mark.display
def test_run_reaches_parsed_proposals_step_after_step(xvfb, vllm_server: VllmServer, tmp_path):
    sessions = tmp_path / "sessions"
    result = holodesk(
        "run", "Archive the first unread email", "--backend", "remote", "--base-url", vllm_server.base_url,
        "--max-steps", "2", "--sessions", str(sessions), stdin="a\n" * 6, timeout=600,
    )  # fmt: skip
    out = result.stdout + result.stderr
    # Two proposals were parsed and put to the user, who approved them; then the step limit.
    assert "Step 1 proposes:" in out and "Step 2 proposes:" in out, out
    assert "unusable" not in out and "cut at max_tokens" not in out, out
    assert result.returncode == 5 and "step_limit" in out, out
    (folder,) = iter_session_folders(sessions)
    steps = read_session(folder).steps
    assert [s["index"] for s in steps] == [1, 2]
    for step in steps:
        json.loads(step["raw_text"])  # the server's answer, as it came, is one JSON object
        assert step["timings"]["tokens_in"] > 3 * 256  # the screenshot's tiles reached the model


def test_locate_gives_a_point_in_the_image(vllm_server: VllmServer, tmp_path):
    image = screenshot(tmp_path / "shot.png", (1280, 800))
    result = holodesk(
        "locate", str(image), "the Archive button", "--backend", "remote", "--base-url", vllm_server.base_url
    )
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    assert 0 <= found["x"] < 1280 and 0 <= found["y"] < 800
    assert json.loads(found["raw_text"]).keys() == {"x", "y"}


def test_annotate_localizes_every_item(vllm_server: VllmServer, tmp_path):
    folder = tmp_path / "batch"
    folder.mkdir()
    lines = []
    for index in range(4):
        screenshot(folder / f"shot-{index}.png", (800 + 64 * index, 600))
        lines.append(
            json.dumps({"id": f"item-{index}", "image": f"shot-{index}.png", "instruction": f"button {index}"})
        )
    (folder / "batch.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.jsonl"
    result = holodesk(
        "annotate", str(folder / "batch.jsonl"), str(output), "--base-url", vllm_server.base_url, "--concurrency", "4"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "localized 4, failed 0" in result.stdout + result.stderr
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert sorted(r["id"] for r in records) == [f"item-{i}" for i in range(4)]
    assert all(0 <= r["point"][0] < 800 + 64 * int(r["id"][-1]) and 0 <= r["point"][1] < 600 for r in records)
