"""`holodesk setup` against a loopback Hugging Face hub: the real command, huggingface_hub's real client.

Each test starts the hub (tests/support/loopback_hub.py) serving a tiny Qwen3.5 checkpoint built here,
points the command at it with HF_ENDPOINT (HF_HUB_OFFLINE, which the test command sets, is removed for
these commands only) and gives it a clean HOME. Checked: progress mid-file, resume after a kill, a
damaged file refused, a disk too small or filling up, an unreachable hub, a revision that does not
exist, a gated non-commercial repository, a cancel; each failure in words and the settings unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.app.setup.homes import settings_file, setup_environment
from tests.support.holodesk_command import HOLODESK_COMMAND, ctrl_c_as_from_a_terminal
from tests.support.loopback_hub import HubRepo, LoopbackHub, running_hub
from tests.support.waiting import wait_until

REPO = "Hcompany/Holo-3.1-0.8B"  # the catalogue's name for holo3.1-0.8b, served here by the loopback hub
WEIGHTS = "model.safetensors"
COMMAND_TIMEOUT_S = 180
CHUNK = 10 * 1024 * 1024  # huggingface_hub writes what it receives in blocks of this size (constants.py)
SETTINGS_BEFORE = '[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "http://gpu-box:8000/v1"\n'


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from bench.qwen35_tiny import Variant, build_qwen35_tiny

    # The real embedding table's 248,320 rows (the tiny tokenizer uses the first 600): 65 MB of weights,
    # so a held download can stop past huggingface_hub's 10 MiB write chunks, as a real one does.
    variant = Variant(name="reference", vocab_size=248320)
    return build_qwen35_tiny(tmp_path_factory.mktemp("hub") / "tiny", dtype="bfloat16", variant=variant)


def models_root(home: Path) -> Path:
    return home / ".local" / "share" / "holodesk" / "models"


def environment(home: Path, endpoint: str) -> dict[str, str]:
    # A held file waits for the test, not for the client's patience.
    return setup_environment(home, endpoint, HF_HUB_DOWNLOAD_TIMEOUT="60")


def setup_command(home: Path, endpoint: str, *args: str, stderr_file: Path | None = None) -> subprocess.Popen[str]:
    err = stderr_file.open("w") if stderr_file else subprocess.PIPE
    return subprocess.Popen(
        [*HOLODESK_COMMAND, "setup", *args],
        env=environment(home, endpoint),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        preexec_fn=ctrl_c_as_from_a_terminal,
    )


def run_setup(home: Path, endpoint: str, *args: str, answers: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*HOLODESK_COMMAND, "setup", *args],
        env=environment(home, endpoint),
        input=answers,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def partial_weights(home: Path) -> Path | None:
    found = list((models_root(home) / ".partial").rglob(f"{WEIGHTS}.part"))
    return found[0] if found else None


def assert_settings_unchanged(home: Path, before: str | None) -> None:
    path = settings_file(home)
    if before is None:
        assert not path.exists(), path.read_text()
    else:
        assert path.read_text() == before
    in_place = [p for p in models_root(home).glob("*/*/config.json") if ".partial" not in p.parts]
    assert not in_place, "a model was put in place"


def installed_checkpoint(home: Path) -> Path:
    settings = tomllib.loads(settings_file(home).read_text())
    assert settings["model"]["backend"] == "local"
    assert settings["model"]["profile"] == "holo3.1"
    return Path(settings["model"]["local"]["checkpoint"])


def assert_same_files(installed: Path, source: Path) -> None:
    for original in source.iterdir():
        assert sha256(installed / original.name) == sha256(original), original.name


@pytest.fixture
def hub(checkpoint: Path) -> Iterator[LoopbackHub]:
    with running_hub(HubRepo.from_folder(REPO, checkpoint)) as server:
        yield server


def repo(hub: LoopbackHub) -> HubRepo:
    return hub.repos[REPO]


def bytes_before(checkpoint: Path, name: str) -> int:
    """What is on disk when `name` starts: the files before it in the hub's (sorted) listing."""
    return sum(p.stat().st_size for p in sorted(checkpoint.iterdir()) if p.name < name)


def test_progress_is_reported_mid_file_and_the_model_is_installed(
    hub: LoopbackHub, home: Path, checkpoint: Path, tmp_path: Path
) -> None:
    hold = 3 * CHUNK
    repo(hub).hold_at[WEIGHTS] = hold
    progress = tmp_path / "stderr.txt"
    command = setup_command(home, hub.url, "--model", "holo3.1-0.8b", "--yes", stderr_file=progress)
    total = sum(p.stat().st_size for p in checkpoint.iterdir())
    mid = f"downloading {WEIGHTS}: {bytes_before(checkpoint, WEIGHTS) + hold} of {total} bytes"
    try:
        wait_until(lambda: mid in progress.read_text(), 60, f"a progress line {mid!r}")
        assert settings_file(home).exists() is False, "the settings were written before the model was whole"
    finally:
        repo(hub).release.set()
    out, _ = command.communicate(timeout=COMMAND_TIMEOUT_S)
    assert command.returncode == 0, progress.read_text()
    lines = re.findall(r": (\d+) of (\d+) bytes", progress.read_text())
    done = [int(d) for d, _ in lines]
    assert done == sorted(done) and done[-1] == total, lines
    assert "licence apache-2.0" in out
    installed = installed_checkpoint(home)
    assert installed.parent.parent == models_root(home)
    assert_same_files(installed, checkpoint)
    assert not (models_root(home) / ".partial").exists(), "the staging folder was left behind"


def test_a_killed_download_resumes_where_it_stopped(hub: LoopbackHub, home: Path, checkpoint: Path) -> None:
    hold = 3 * CHUNK
    repo(hub).hold_at[WEIGHTS] = hold
    command = setup_command(home, hub.url, "--model", "holo3.1-0.8b", "--yes")

    def held() -> bool:
        part = partial_weights(home)
        return part is not None and part.stat().st_size == hold

    try:
        wait_until(held, 60, f"{WEIGHTS}.part holding {hold} bytes")
        command.kill()
        command.wait(timeout=30)
    finally:
        repo(hub).release.set()
    assert_settings_unchanged(home, None)
    del repo(hub).hold_at[WEIGHTS]
    finished = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert finished.returncode == 0, finished.stderr
    asked = [r.range for r in hub.file_requests(WEIGHTS)]
    assert asked == [None, f"bytes={hold}-"], asked
    assert_same_files(installed_checkpoint(home), checkpoint)


def test_a_damaged_file_is_refused_and_deleted(hub: LoopbackHub, home: Path) -> None:
    settings_file(home).write_text(SETTINGS_BEFORE)
    repo(hub).corrupt.add(WEIGHTS)
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert f"{WEIGHTS} arrived damaged: its sha256 is" in result.stderr, result.stderr
    assert "the file was deleted and the model not installed" in result.stderr
    assert partial_weights(home) is None
    assert not list(models_root(home).rglob(WEIGHTS)), "the damaged file was kept"
    assert_settings_unchanged(home, SETTINGS_BEFORE)


def test_a_small_git_file_is_checked_against_its_blob_id(hub: LoopbackHub, home: Path) -> None:
    repo(hub).corrupt.add("config.json")
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert "config.json arrived damaged: its git blob id is" in result.stderr, result.stderr
    assert_settings_unchanged(home, None)


def test_an_unreachable_hub_fails_in_words(home: Path) -> None:
    settings_file(home).write_text(SETTINGS_BEFORE)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    result = run_setup(home, closed, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert f"cannot reach the Hugging Face hub at {closed}" in result.stderr, result.stderr
    assert "check this computer's network connection" in result.stderr
    assert "Traceback" not in result.stderr
    assert_settings_unchanged(home, SETTINGS_BEFORE)


def test_a_revision_that_does_not_exist_fails_in_words(hub: LoopbackHub, home: Path) -> None:
    settings_file(home).write_text(SETTINGS_BEFORE)
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--revision", "v9", "--yes")
    assert result.returncode == 1
    assert f"{REPO} has no revision 'v9' on {hub.url}" in result.stderr, result.stderr
    assert not hub.file_requests(WEIGHTS)
    assert_settings_unchanged(home, SETTINGS_BEFORE)


def test_a_gated_non_commercial_repository_is_explained(hub: LoopbackHub, home: Path) -> None:
    repo(hub).gated = True
    repo(hub).license = "cc-by-nc-4.0"
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert "licence cc-by-nc-4.0: NON-COMMERCIAL use only" in result.stdout, result.stdout
    assert f"{REPO} is gated (licence cc-by-nc-4.0): its owner asks each person to accept" in result.stderr
    assert f"Open {hub.url}/{REPO} while logged in" in result.stderr
    assert_settings_unchanged(home, None)


def test_saying_no_downloads_nothing(hub: LoopbackHub, home: Path) -> None:
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", answers="n\n")
    assert result.returncode == 130
    assert "Not downloaded; nothing changed." in result.stdout
    assert not hub.file_requests(WEIGHTS)
    assert_settings_unchanged(home, None)


def test_ctrl_c_mid_download_keeps_the_part_and_the_settings(hub: LoopbackHub, home: Path, checkpoint: Path) -> None:
    settings_file(home).write_text(SETTINGS_BEFORE)
    hold = 2 * CHUNK
    repo(hub).hold_at[WEIGHTS] = hold
    command = setup_command(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    try:
        wait_until(lambda: (p := partial_weights(home)) is not None and p.stat().st_size == hold, 60, "the hold")
        command.send_signal(signal.SIGINT)
        _, err = command.communicate(timeout=60)
    finally:
        repo(hub).release.set()
    assert command.returncode == 130, err
    assert "cancelled (what was downloaded is kept in" in err and "the settings are unchanged" in err, err
    part = partial_weights(home)
    assert part is not None and part.stat().st_size == hold
    assert_settings_unchanged(home, SETTINGS_BEFORE)


# --- a disk too small, and one that fills up mid-download: a tmpfs of the test's own ---------------


@pytest.fixture
def small_disk(home: Path) -> Iterator[Path]:
    data = home / ".local" / "share"
    data.mkdir(parents=True)
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root (these tests run as root in the project's environment)")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=80m", "tmpfs", str(data)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"this machine refused to mount a tmpfs: {mounted.stderr.decode().strip()}")
    try:
        yield data
    finally:
        subprocess.run(["umount", "-l", str(data)], check=True)


def fill(folder: Path, leave: int) -> Path:
    """Write a filler file leaving about `leave` bytes free."""
    filler = folder / "filler"
    free = shutil.disk_usage(folder).free
    with filler.open("wb") as f:
        f.write(b"\0" * max(free - leave, 0))
    return filler


def test_a_disk_too_small_is_refused_before_downloading(
    hub: LoopbackHub, home: Path, small_disk: Path, checkpoint: Path
) -> None:
    fill(small_disk, 512 * 1024)
    total = sum(p.stat().st_size for p in checkpoint.iterdir())
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert f"not enough free disk space for {REPO}: it needs {total / 1e6:.1f} MB more" in result.stderr, result.stderr
    assert not hub.file_requests(WEIGHTS)
    assert_settings_unchanged(home, None)


def test_a_disk_that_fills_mid_download_fails_in_words_and_resumes_later(
    hub: LoopbackHub, home: Path, small_disk: Path, checkpoint: Path
) -> None:
    hold = CHUNK
    repo(hub).hold_at[WEIGHTS] = hold
    command = setup_command(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    try:
        wait_until(lambda: (p := partial_weights(home)) is not None and p.stat().st_size == hold, 60, "the hold")
        filler = fill(small_disk, 64 * 1024)
    finally:
        repo(hub).release.set()
    _, err = command.communicate(timeout=COMMAND_TIMEOUT_S)
    assert command.returncode == 1, err
    assert f"the disk filled while downloading {REPO}'s {WEIGHTS}" in err, err
    assert "it resumes where it stopped; the settings are unchanged" in err
    assert "Traceback" not in err
    assert_settings_unchanged(home, None)
    filler.unlink()
    del repo(hub).hold_at[WEIGHTS]
    finished = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert finished.returncode == 0, finished.stderr
    assert hub.file_requests(WEIGHTS)[-1].range is not None, "the second run started the file again"
    assert_same_files(installed_checkpoint(home), checkpoint)


def test_offline_mode_is_named_not_taken_for_a_network_fault(hub: LoopbackHub, home: Path) -> None:
    result = subprocess.run(
        [*HOLODESK_COMMAND, "setup", "--model", "holo3.1-0.8b", "--yes"],
        env=environment(home, hub.url) | {"HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert result.returncode == 1
    assert "the Hugging Face client is in offline mode (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE" in result.stderr
    assert not hub.requests
    assert_settings_unchanged(home, None)


def test_without_a_model_it_lists_what_fits_with_a_measured_step_and_installs_the_choice(
    checkpoint: Path, home: Path
) -> None:
    repos = [HubRepo.from_folder(name, checkpoint) for name in (REPO, "Hcompany/Holo-3.1-4B")]
    with running_hub(*repos) as hub:
        result = run_setup(home, hub.url, answers="1\ny\n")
    assert result.returncode == 0, result.stdout + result.stderr
    listed = re.findall(r"^  \d\. (Holo3\.1-\S+) on the (CPU|GPU) \(.*\): (\S+)\n     (.*)$", result.stdout, re.M)
    assert [name for name, *_ in listed] in (["Holo3.1-0.8B", "Holo3.1-4B"], ["Holo3.1-4B", "Holo3.1-0.8B"])
    assert all(re.search(r" to download, .*, about [\d.]+ (s|min) a step on this (CPU|GPU)$", r[3]) for r in listed)
    chosen_repo = listed[0][2]
    assert hub.file_requests(WEIGHTS) and all(chosen_repo in r.path for r in hub.file_requests(WEIGHTS))
    assert installed_checkpoint(home).parent.name == chosen_repo.replace("/", "--")


def test_an_answer_that_is_no_choice_changes_nothing(hub: LoopbackHub, home: Path) -> None:
    result = run_setup(home, hub.url, answers="7\n")
    assert result.returncode == 1
    assert "'7' is not one of the numbers 1 to 4; nothing changed" in result.stderr  # 2 models, Holotron, a server
    assert not hub.requests
    assert_settings_unchanged(home, None)


def test_a_model_folder_edited_by_hand_is_refused_and_left_alone(hub: LoopbackHub, home: Path) -> None:
    first = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert first.returncode == 0, first.stderr
    installed = installed_checkpoint(home)
    edited = installed / "config.json"
    edited.write_text(edited.read_text().replace('"hidden_size": 64', '"hidden_size": 65'))
    settings_file(home).write_text(SETTINGS_BEFORE)
    again = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert again.returncode == 1
    assert f"the downloaded model in {installed} was changed since it was downloaded" in again.stderr, again.stderr
    assert "config.json does not match its checksum" in again.stderr
    assert '"hidden_size": 65' in edited.read_text(), "the person's edit was overwritten"
    assert settings_file(home).read_text() == SETTINGS_BEFORE


def test_without_the_engine_installed_it_says_what_to_install(hub: LoopbackHub, home: Path) -> None:
    # huggingface_hub made unimportable, as in an install without the holotron extra.
    code = "import sys; sys.modules['huggingface_hub'] = None; from holodesk.app.cli.main import main; sys.exit(main())"
    result = subprocess.run(
        [HOLODESK_COMMAND[0], "-c", code, "setup", "--model", "holo3.1-0.8b", "--yes"],
        env=environment(home, hub.url),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )
    assert result.returncode == 1, result.stderr
    assert "Holodesk's own engine, which is not installed here (huggingface_hub is missing)" in result.stderr
    assert "pip install 'holodesk[holotron]'" in result.stderr and "Traceback" not in result.stderr
    assert not hub.requests
    assert_settings_unchanged(home, None)


def test_a_settings_file_with_problems_is_not_rewritten(hub: LoopbackHub, home: Path) -> None:
    broken = '[model]\nbackend = "nowhere"\n'
    settings_file(home).write_text(broken)
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert f"the settings file {settings_file(home)} has problems" in result.stderr, result.stderr
    assert "so it was not changed: fix it (or move it away) and run holodesk setup again" in result.stderr
    assert settings_file(home).read_text() == broken
    downloaded = [p for p in models_root(home).glob("*/*/config.json") if ".partial" not in p.parts]
    assert len(downloaded) == 1, "the model should stay downloaded for the next run"


def test_a_lost_connection_resumes_within_the_run(hub: LoopbackHub, home: Path, checkpoint: Path) -> None:
    repo(hub).drop_at[WEIGHTS] = CHUNK + CHUNK // 2  # one 10 MiB block written, then the connection drops
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 0, result.stderr
    assert [r.range for r in hub.file_requests(WEIGHTS)] == [None, f"bytes={CHUNK}-"]
    assert_same_files(installed_checkpoint(home), checkpoint)


def test_a_connection_that_keeps_dropping_fails_in_words_and_keeps_the_part(hub: LoopbackHub, home: Path) -> None:
    repo(hub).drop_at[WEIGHTS] = CHUNK + CHUNK // 2
    repo(hub).drops_left = 100  # more than huggingface_hub's retries
    result = run_setup(home, hub.url, "--model", "holo3.1-0.8b", "--yes")
    assert result.returncode == 1
    assert f"the download of {REPO}'s {WEIGHTS} from {hub.url} stopped and did not resume" in result.stderr
    assert "Traceback" not in result.stderr
    part = partial_weights(home)
    assert part is not None and part.stat().st_size == CHUNK
    assert_settings_unchanged(home, None)
