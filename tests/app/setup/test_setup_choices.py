"""`holodesk setup` offers the first-run window's choices: Holotron-12B on a GPU and a model server elsewhere.

The real command runs with a clean HOME (and the GPUs hidden, CUDA_VISIBLE_DEVICES=""), against a
loopback OpenAI-compatible server (bench/rigs/fake_openai_server.py) or a closed port; the settings file
is read back. Holotron-12B on a GPU that holds it is the same command with torch's GPU list replaced by
one card (there is no such GPU here), downloading a stand-in from the loopback hub.
"""

from __future__ import annotations

import socket
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import FakeOpenAIServer
from tests.app.setup.homes import settings_file, setup_environment
from tests.support.holodesk_command import HOLODESK_COMMAND
from tests.support.loopback_hub import HubRepo, LoopbackHub, running_hub

COMMAND_TIMEOUT_S = 180
HOLOTRON = "Hcompany/Holotron-12B"
SETTINGS_BEFORE = '[model]\nprofile = "holo3.1"\n\n[model.local]\ndevice = "cpu"\n'


def environment(home: Path) -> dict[str, str]:
    # The hub is never asked here: a download would fail on the discard port. No NVIDIA GPU, whatever this has.
    return setup_environment(home, "http://127.0.0.1:9", CUDA_VISIBLE_DEVICES="")


def setup(
    home: Path, *args: str, answers: str = "", python: tuple[str, ...] = HOLODESK_COMMAND
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*python, "setup", *args],
        env=environment(home),
        input=answers,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_server_is_checked_by_asking_it_and_saved_only_once_it_answered(home: Path) -> None:
    settings_file(home).write_text(SETTINGS_BEFORE)

    def refused(*args: str) -> str:
        result = setup(home, *args)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "the settings are unchanged" in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert settings_file(home).read_text() == SETTINGS_BEFORE
        return result.stderr

    assert "expected a server URL such as http://gpu-box:8000/v1" in refused("--server", "ftp://gpu-box")
    port = closed_port()
    words = refused("--server", f"127.0.0.1:{port}")
    assert f"Nothing is listening at http://127.0.0.1:{port}/v1" in words, words
    assert "Correct the URL, or start the model server there" in words and "docs/remote-server.md" in words
    with FakeOpenAIServer(models=("Hcompany/Holo-3.1-4B", HOLOTRON)) as server:
        words = refused("--server", server.root_url)
        assert f"the server at {server.base_url} cannot be used as it is" in words, words
        assert "Hcompany/Holo-3.1-4B" in words and HOLOTRON in words, words
    with FakeOpenAIServer(models=(HOLOTRON,)) as server:
        assert "--server takes no --model: the server says" in refused("--server", server.root_url, "--model", "x/y")
        assert not server.requests
        result = setup(home, "--server", server.root_url)
        assert [r.path for r in server.requests] == ["/v1/models"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Ready: the server at {server.base_url} serves {HOLOTRON} (holotron profile)" in result.stdout
    settings = tomllib.loads(settings_file(home).read_text())
    assert settings["model"]["backend"] == "remote" and settings["model"]["profile"] == "holotron"
    assert settings["model"]["remote"] == {"base_url": server.base_url, "model": HOLOTRON}
    assert settings["model"]["local"]["device"] == "cpu", "the rest of the file was not kept"


def test_a_server_needs_no_engine_installed(home: Path) -> None:
    # torch and huggingface_hub made unimportable, as in an install without the holotron extra.
    code = (
        "import sys; sys.modules['torch'] = sys.modules['huggingface_hub'] = None;"
        " from holodesk.app.cli.main import main; sys.exit(main())"
    )
    with FakeOpenAIServer(models=("Hcompany/Holo-3.1-4B",)) as server:
        result = setup(home, "--server", server.root_url, python=(HOLODESK_COMMAND[0], "-c", code))
    assert result.returncode == 0, result.stdout + result.stderr
    model = tomllib.loads(settings_file(home).read_text())["model"]
    assert model["backend"] == "remote" and model["profile"] == "holo3.1", model


def test_holotron_by_name_is_refused_without_a_gpu_that_holds_it_naming_the_server(home: Path) -> None:
    for args in (("--model", "holotron-12b", "--yes"), ("--model", HOLOTRON, "--yes")):
        result = setup(home, *args)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "Holotron-12B needs an NVIDIA GPU of 32.0 GiB (no NVIDIA GPU here); nothing changed" in result.stderr
        assert "holodesk setup --server URL" in result.stderr and "Traceback" not in result.stderr, result.stderr
    on_cpu = setup(home, "--model", "holotron-12b", "--device", "cpu", "--yes")
    assert on_cpu.returncode == 1 and "Holotron-12B runs on a GPU only" in on_cpu.stderr, on_cpu.stderr
    assert "holodesk setup --server URL" in on_cpu.stderr
    assert not settings_file(home).exists()
    assert not (home / ".local" / "share" / "holodesk" / "models").exists()


def test_the_list_offers_holotron_and_a_server_and_the_server_is_chosen_by_its_number(home: Path) -> None:
    refused = setup(home, answers="3\n")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    heads = [line for line in refused.stdout.splitlines() if line[:4] in ("  1.", "  2.", "  3.", "  4.")]
    assert len(heads) == 4, refused.stdout
    assert {heads[0].split()[1], heads[1].split()[1]} == {"Holo3.1-0.8B", "Holo3.1-4B"}, heads
    assert heads[2] == f"  3. Holotron-12B on a GPU (no NVIDIA GPU here): {HOLOTRON}", heads
    assert heads[3].startswith("  4. A model server elsewhere"), heads
    assert (
        "choice 3 cannot be chosen on this computer: Holotron-12B on a GPU (no NVIDIA GPU here); nothing changed"
        in refused.stderr
    )
    assert "holodesk setup --server URL" in refused.stderr and not settings_file(home).exists()

    port = closed_port()
    closed = setup(home, answers=f"4\n127.0.0.1:{port}\n")
    assert closed.returncode == 1 and f"Nothing is listening at http://127.0.0.1:{port}/v1" in closed.stderr
    assert not settings_file(home).exists()
    with FakeOpenAIServer(models=("Hcompany/Holo-3.1-0.8B",)) as server:
        result = setup(home, answers=f"4\n{server.root_url}\n")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The server's URL (such as http://gpu-box:8000/v1): " in result.stdout
    model = tomllib.loads(settings_file(home).read_text())["model"]
    assert model["backend"] == "remote" and model["remote"]["model"] == "Hcompany/Holo-3.1-0.8B", model


# --- Holotron-12B on a GPU that holds it: the command with a GPU given (there is no such GPU here) ----------

# The command with torch's GPU list replaced by one card (name:GiB in $GIVEN_GPU), and no GPU to time a step on.
WITH_A_GPU = (
    "import os, sys; from holodesk.inference import hardware; from holodesk.app.setup import step_estimate;"
    " name, gib = os.environ['GIVEN_GPU'].split(':'); size = int(gib) * hardware.GIB;"
    " card = hardware.CudaDevice(0, name, size, size, (8, 9)); hardware.cuda_devices = lambda: ((card,), None);"
    " step_estimate.measure = lambda width, device='cpu', budget_s=0.25: step_estimate.Rates(1e12, 1e11, device);"
    " from holodesk.app.cli.main import main; sys.exit(main())"
)


def setup_with_a_gpu(home: Path, gpu: str, hub: LoopbackHub, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [HOLODESK_COMMAND[0], "-c", WITH_A_GPU, "setup", *args],
        env=environment(home) | {"GIVEN_GPU": gpu, "HF_ENDPOINT": hub.url},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


@pytest.fixture
def hub() -> Iterator[LoopbackHub]:
    files = {"config.json": b'{"model_type": "stand-in"}\n', "model.safetensors": b"\0" * 4096}
    with running_hub(HubRepo(HOLOTRON, files)) as server:
        yield server


def test_on_a_gpu_that_holds_it_holotron_is_the_first_choice_and_set_up(hub: LoopbackHub, home: Path) -> None:
    small = setup_with_a_gpu(home, "NVIDIA T4:16", hub, "--model", "holotron-12b", "--yes")
    assert small.returncode == 1, small.stdout + small.stderr
    assert "Holotron-12B needs an NVIDIA GPU of 32.0 GiB (NVIDIA T4 has 16.0 GiB: too small)" in small.stderr
    assert "holodesk setup --server URL" in small.stderr
    assert not hub.requests and not settings_file(home).exists()

    on_cpu = setup_with_a_gpu(home, "NVIDIA L40S:48", hub, "--yes", "--device", "cpu")  # the list's first, on a CPU
    assert on_cpu.returncode == 1 and "Holotron-12B runs on a GPU only" in on_cpu.stderr, on_cpu.stderr
    assert not hub.requests and not settings_file(home).exists()

    result = setup_with_a_gpu(home, "NVIDIA L40S:48", hub, "--yes")  # the list's first choice, as the window's
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"  1. Holotron-12B on a GPU (the best agent, fits this GPU): {HOLOTRON}" in result.stdout
    model = tomllib.loads(settings_file(home).read_text())["model"]
    assert model["backend"] == "local" and model["profile"] == "holotron" and model["local"]["device"] == "cuda"
    checkpoint = Path(model["local"]["checkpoint"])
    assert checkpoint.parent.name == HOLOTRON.replace("/", "--"), model
    assert (checkpoint / "model.safetensors").read_bytes() == b"\0" * 4096
