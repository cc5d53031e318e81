"""`holodesk doctor` run as a user runs it: the console script, a real X server, a real HTTP server."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer
from tests.support.holodesk_command import HOLODESK_COMMAND

HOLODESK = list(HOLODESK_COMMAND)


def doctor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOLODESK, "doctor", *args], env=env, capture_output=True, text=True, timeout=120, cwd=os.getcwd()
    )


def base_env(display: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "HOLODESK_API_KEY")}
    env["CUDA_VISIBLE_DEVICES"] = ""  # a GPU on the test machine must not change the verdict
    if display:
        env["DISPLAY"] = display
    return env


def lines_of(result: subprocess.CompletedProcess[str]) -> dict[str, str]:
    """First line for each check name -> its status."""
    found: dict[str, str] = {}
    for line in result.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("OK", "INFO", "WARN", "FAIL"):
            found.setdefault(rest.strip().split(":")[0], status)
    return found


@pytest.mark.display
def test_without_a_gpu_the_local_backend_is_blocked_and_says_why(xvfb):
    result = doctor("--model", "/nonexistent/checkpoint", env=base_env(os.environ["DISPLAY"]))
    assert result.returncode == 1, result.stdout + result.stderr
    checks = lines_of(result)
    assert checks["display"] == "OK"
    assert checks["monitor 1"] == "OK"
    assert checks["input"] == "OK"
    assert checks["cuda"] == "FAIL"
    assert checks["weights"] == "FAIL"
    assert "no CUDA GPU on this machine" in result.stdout
    assert "--backend remote" in result.stdout  # the fix names the way out
    assert "/nonexistent/checkpoint" in result.stdout
    assert result.stdout.rstrip().endswith("blocked: fix the FAIL lines above (backend local)")


@pytest.mark.display
def test_remote_backend_without_a_gpu_is_ready(xvfb):
    with FakeOpenAIServer() as server:
        result = doctor("--backend", "remote", "--base-url", server.base_url, env=base_env(os.environ["DISPLAY"]))
    assert result.returncode == 0, result.stdout + result.stderr
    checks = lines_of(result)
    # A remote install has no torch, CUDA or Mamba kernels, and needs none: one line says so.
    assert checks["gpu"] == "INFO" and "not needed for the remote backend" in result.stdout
    assert not {"torch", "cuda", "kernel", "mamba path"} & set(checks), result.stdout
    assert checks["server"] == "OK"
    assert "serves Hcompany/Holotron-12B" in result.stdout
    # The fake cannot count a prompt's tokens (no /tokenize), so whether a task fits is not known.
    assert checks["context"] == "INFO" and "context 32768 tokens" in result.stdout
    assert checks["server flags"] == "INFO" and '"backend":"guidance"' in result.stdout
    assert result.stdout.rstrip().endswith("ready (backend remote)")


@pytest.mark.display
def test_an_unreachable_server_blocks_the_remote_backend(xvfb):
    with FakeOpenAIServer() as server:
        url = server.base_url
    result = doctor("--backend", "remote", "--base-url", url, env=base_env(os.environ["DISPLAY"]))
    assert result.returncode == 1
    assert lines_of(result)["server"] == "FAIL"
    assert "connection refused" in result.stdout


def test_no_display_is_reported_with_its_fix(tmp_path: Path):
    with FakeOpenAIServer() as server:
        result = doctor("--backend", "remote", "--base-url", server.base_url, env=base_env(None))
    assert result.returncode == 1
    assert lines_of(result)["display"] == "FAIL"
    assert "DISPLAY and WAYLAND_DISPLAY are unset" in result.stdout
    assert "monitor 1" not in lines_of(result)  # nothing that needs a display is attempted
    # ... and no capture backend or hotkeys are called OK next to the display's FAIL.
    assert lines_of(result)["backend"] == "INFO", result.stdout
    assert "DISPLAY=unset" not in result.stdout and "hotkeys" not in lines_of(result)


@pytest.mark.display
def test_the_model_is_placed_before_loading_and_a_missing_gpu_is_refused(xvfb, tiny_checkpoint: Path):
    """doctor reads the checkpoint with the engine's spec and places it (memory plan) before any weight loads."""
    result = doctor("--model", str(tiny_checkpoint), "--device", "cuda", env=base_env(os.environ["DISPLAY"]))
    assert result.returncode == 1, result.stdout + result.stderr
    checks = lines_of(result)
    assert checks["weights"] == "OK" and checks["load plan"] == "FAIL"
    assert "No CUDA GPU to load the model on" in result.stdout and "remote backend" in result.stdout


@pytest.mark.display
def test_doctor_try_loads_the_tiny_checkpoint_and_runs_the_first_contact(xvfb, tiny_checkpoint: Path):
    result = doctor("--model", str(tiny_checkpoint), "--device", "cpu", "--try", env=base_env(os.environ["DISPLAY"]))
    checks = lines_of(result)
    assert checks["weights"] == "OK"
    assert checks["load plan"] == "WARN" and "float32 on cpu, sdpa attention" in result.stdout
    assert "runs on the CPU" in result.stdout and "weights" in result.stdout and "cache" in result.stdout
    try_line = next(line for line in result.stdout.splitlines() if line.split(" ", 1)[-1].lstrip().startswith("try:"))
    assert checks["try"] == "OK", result.stdout + result.stderr
    assert "in-process engine" in try_line and "tokens/s" in try_line and try_line.isprintable()
    assert result.returncode == 0, result.stdout + result.stderr
    # Which CPU paths run, read from the CPU's own flags (the kernel's, not torch's answer).
    flags = set(
        next(line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")).split()
    )
    bf16 = bool({"avx512_bf16", "amx_bf16"} & flags)
    assert checks["cpu paths"] == ("OK" if bf16 else "INFO"), result.stdout
    assert ("through oneDNN" if bf16 else "through the stock GEMM") in result.stdout
    assert ("the prefill's delta rule with them" if bf16 else "the prefill's delta rule in float32") in result.stdout


def test_wayland_without_xwayland_is_a_warning_that_names_the_terminal_way(tmp_path: Path):
    env = base_env(None)
    env.update(WAYLAND_DISPLAY="wayland-holodesk-none", XDG_SESSION_TYPE="wayland", XDG_RUNTIME_DIR=str(tmp_path))
    with FakeOpenAIServer() as server:
        result = doctor("--backend", "remote", "--base-url", server.base_url, env=env)
    checks = lines_of(result)
    assert checks["display"] == "WARN", result.stdout
    assert "overlay and approval panel need XWayland" in result.stdout
    assert "`holodesk run` with the terminal approver works" in result.stdout
    assert "monitor 1" not in checks  # the X11 capture check is not what runs here


def test_the_newer_h_company_models_are_named_with_what_is_not_verified():
    from holodesk.app.cli.server_checks import model_family_check

    holo4 = model_family_check("holo4-35b-a3b", "holotron")
    assert holo4 is not None and holo4.status.value == "WARN" and "--profile holo4" in holo4.fix
    assert "--tool-call-parser qwen3_coder" in holo4.fix and "--served-model-name holo4-35b-a3b" in holo4.fix
    served = model_family_check("Hcompany/Holo-3.1-35B-A3B", "holo3.1")
    assert served is not None and served.status.value == "INFO"
    assert "vllm serve Hcompany/Holo-3.1-35B-A3B " in served.detail and '{"image": 5, "video": 0}' in served.detail
    # Holo3.1 asked for native tool calls is still Holo3.1; Holo3 is not Holo3.1 (nor the other way round).
    tools = model_family_check("Hcompany/Holo-3.1-35B-A3B", "holo3.1-tools")
    assert tools is not None and tools.status.value == "INFO"
    wrong = model_family_check("Hcompany/Holo-3.1-35B-A3B", "holo3")
    assert wrong is not None and wrong.status.value == "WARN" and "--profile holo3.1" in wrong.fix
    nano = model_family_check("Hcompany/Holotron-3-Nano", "holotron")
    assert (
        nano is not None
        and nano.status.value == "WARN"
        and "--profile holotron3-nano" in nano.fix
        and "--reasoning-parser nemotron_v3" in nano.fix
    )
    assert model_family_check("Hcompany/Holotron-12B", "holotron") is None


@pytest.mark.parametrize(
    ("served", "family"),
    [
        ("holo4-35b-a3b", "holo4"),
        ("holo4-27b", "holo4"),
        ("Hcompany/Holo4-35B-A3B-FP8", "holo4"),
        ("holo3-1-35b-a3b", "holo3.1"),
        ("Hcompany/Holo-3.1-35B-A3B", "holo3.1"),
        ("Hcompany/Holo3-35B-A3B", "holo3"),
        ("holo3-122b-a10b", "holo3"),  # "3-1" followed by a digit is not 3.1
        ("Hcompany/Holotron-12B", None),
        ("Hcompany/Holo1.5-7B", None),
        ("Hcompany/Holotron-3-Nano", "holotron3-nano"),
        ("holotron_3_nano", "holotron3-nano"),
    ],
)
def test_served_names_are_recognised_by_family(served: str, family: str | None) -> None:
    from holodesk.app.cli.server_checks import served_family

    assert served_family(served) == family


@pytest.mark.display
def test_a_server_serving_holo4_gets_the_warning_in_the_report(xvfb):
    with FakeOpenAIServer(models=("holo4-35b-a3b",)) as server:
        result = doctor("--backend", "remote", "--base-url", server.base_url, env=base_env(os.environ["DISPLAY"]))
    assert lines_of(result)["model"] == "WARN", result.stdout
    assert "holo4-35b-a3b looks like H Company's holo4, which the holotron profile does not ask" in result.stdout
    assert "choose the holo4 profile (--profile holo4)" in result.stdout
    assert "--tool-call-parser qwen3_coder" in result.stdout  # the command it needs
    assert result.returncode == 0  # a warning, not a block: the user may know better


def test_the_profile_doctor_suggests_is_one_doctor_accepts():
    """The model line's fix says `--profile holo4`; doctor run with exactly that flag takes it and
    then finds the profile matching the served model (was: "unrecognized arguments")."""
    with FakeOpenAIServer(models=("holo4-35b-a3b",)) as server:
        first = doctor("--backend", "remote", "--base-url", server.base_url, env=base_env(None))
        assert "choose the holo4 profile (--profile holo4)" in first.stdout, first.stdout + first.stderr
        again = doctor("--backend", "remote", "--base-url", server.base_url, "--profile", "holo4", env=base_env(None))
    assert "unrecognized arguments" not in again.stderr, again.stderr
    model = next(line for line in again.stdout.splitlines() if line.startswith(("INFO  model:", "WARN  model:")))
    assert model.startswith("INFO") and "holo4-35b-a3b with the holo4 profile" in model, again.stdout


def test_the_server_flags_line_fits_the_profile():
    """holo4 answers with tool calls: doctor names vLLM's tool-call parser, not the structured-output
    backend (which tool calls never go through); holotron's JSON answers need that backend."""
    with FakeOpenAIServer(models=("holo4-35b-a3b",)) as server:
        holo4 = doctor("--backend", "remote", "--base-url", server.base_url, "--profile", "holo4", env=base_env(None))
        holotron = doctor(
            "--backend", "remote", "--base-url", server.base_url, "--profile", "holotron", env=base_env(None)
        )
    flags = next(line for line in holo4.stdout.splitlines() if line.startswith("INFO  server flags:"))
    assert "--tool-call-parser qwen3_coder" in flags and "structured-outputs" not in flags, holo4.stdout
    flags = next(line for line in holotron.stdout.splitlines() if line.startswith("INFO  server flags:"))
    assert '--structured-outputs-config \'{"backend":"guidance"' in flags, holotron.stdout


@pytest.mark.display
def test_a_try_whose_answer_does_not_parse_is_not_ready(xvfb):
    """The server answers in prose, which the holotron profile cannot read (asked twice: the retry
    too): the try line fails, and doctor ends "blocked", exit 1 (was: a WARN, then "ready", exit 0)."""
    with FakeOpenAIServer() as server:
        server.queue(*[Completion(text="I would click the Archive button.")] * 4)
        result = doctor(
            "--backend", "remote", "--base-url", server.base_url, "--try", env=base_env(os.environ["DISPLAY"])
        )
    assert lines_of(result)["try"] == "FAIL", result.stdout
    assert "did not parse" in result.stdout
    assert result.returncode == 1
    assert result.stdout.rstrip().endswith("blocked: fix the FAIL lines above (backend remote)")


def test_a_down_server_under_holo4_names_holo4s_command():
    """`holodesk run --profile holo4` against a port nobody listens on: the advice is the holo4 model's
    vLLM command, not Holotron-12B's."""
    with FakeOpenAIServer() as server:
        url = server.base_url  # closed on leaving: nothing listens there any more
    env = base_env(None)
    result = subprocess.run(
        [*HOLODESK, "run", "--backend", "remote", "--base-url", url, "--profile", "holo4", "open the inbox"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "vllm serve Hcompany/Holo4-35B-A3B-FP8 --enable-auto-tool-choice" in result.stderr, result.stderr
    assert "Holotron-12B" not in result.stderr
