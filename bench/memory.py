"""Figure 5: resident memory of the idle tray app, and of a process with the tiny model loaded, each fresh.

"app idle" is the real thing: `python -m holodesk.app.cli` (the tray app, `holodesk.app.gui.main.run_app`) started in a
fresh process on a private Xvfb (xcb, no tray host, so the indicator is its control window), with
XDG_CONFIG_HOME pointing at a temporary holodesk/settings.toml that selects the scripted backend
(so no model loads and torch is not imported), a temporary XDG_DATA_HOME and its own
HOLODESK_INSTANCE_NAME. Once `python -m holodesk.app.cli trigger show` answers (the instance listens; the
"show" also pops up its notification) and one more second has passed (the policy and the hotkey
listener start after the instance listens), VmRSS and VmHWM are read from /proc/<pid>/status and
the app is terminated.

"app modules + indicator" is a stand-in built in-process: it imports every module of app/,
automation/ and inference/ (torch and transformers are imported lazily by those modules and so are
not loaded), creates the QApplication (offscreen platform) with the tray indicator and the overlay
controller, and idles through the event loop for a moment. It is the base of "app modules + tiny
model": the same process after loading the tiny real-layout checkpoint (bench/nemotron_tiny) with
LocalBackend (CPU, its saved bfloat16: torch, transformers and the engine imported) and running one
step on a 1920x1080 screenshot, so the difference between those two is what the model adds.
Baseline: a bare Python interpreter. Figures are VmRSS after settling and VmHWM (the peak), in MiB;
the children run interleaved.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the harness pulls in numpy: the children must not import it (the baseline is bare)
    from bench.harness import BenchResult, BenchSettings
    from holodesk.automation.virtual_display import XvfbServer

NAME = "memory"
PYTHON = "python"
APP = "app idle"
MODULES = "app modules + indicator"
TINY_MODEL = "app modules + tiny model"
# The children `python -m bench.memory --child` builds in-process; APP is `python -m holodesk.app.cli` itself.
CHILDREN = (PYTHON, MODULES, TINY_MODEL)
KINDS = (PYTHON, APP, MODULES, TINY_MODEL)
BASELINES = {APP: PYTHON, MODULES: PYTHON, TINY_MODEL: MODULES}
PACKAGES = ("holodesk.app", "holodesk.automation", "holodesk.inference")
# Subcommand modules that only the command line loads, one at a time; the tray app does not import them.
# The command line is never imported by the tray app.
NOT_IN_THE_TRAY_APP = ("holodesk.app.cli",)
REPO_ROOT = Path(__file__).resolve().parent.parent
APP_START_TIMEOUT_S = 60.0
APP_SETTLE_S = 1.0  # after the instance answers: the scripted policy and the hotkey listener start then
SCRIPTED_ANSWER = "Nothing to do."  # never asked for: the app idles


def _read_status_mib(path: str | Path = "/proc/self/status") -> dict[str, float]:
    """VmRSS and VmHWM from a /proc/<pid>/status file, in MiB."""
    values: dict[str, float] = {}
    with open(path, encoding="utf-8") as status:
        for line in status:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) / 1024
    return values


def _import_app_modules() -> tuple[list[str], dict[str, str]]:
    imported: list[str] = []
    failed: dict[str, str] = {}
    for package_name in PACKAGES:
        package = importlib.import_module(package_name)
        for module in pkgutil.walk_packages(package.__path__, prefix=f"{package_name}."):
            if module.name.startswith(NOT_IN_THE_TRAY_APP):
                continue
            try:
                importlib.import_module(module.name)
                imported.append(module.name)
            except Exception as exc:  # a module being written in parallel may not import yet: say so
                failed[module.name] = f"{type(exc).__name__}: {exc}"
    return imported, failed


def _modules_and_indicator() -> dict[str, Any]:
    """Import the app's modules and show its indicator (see the module docstring); returns what was imported."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    imported, failed = _import_app_modules()
    # measured: the children import only what each figure counts (the baseline is a bare interpreter)
    from holodesk.app.gui.app_state import AppState
    from holodesk.app.gui.qt import QtGui, QtWidgets
    from holodesk.app.gui.tray import make_indicator

    application = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])

    def icon_for(state: AppState) -> QtGui.QIcon:
        pixmap = QtGui.QPixmap(32, 32)
        pixmap.fill(QtGui.QColor("#3b82f6"))
        return QtGui.QIcon(pixmap)

    keep: list[Any] = [make_indicator(icon_for)]
    if "holodesk.app.gui.overlay" in imported:
        from holodesk.app.gui.overlay import OverlayController  # heavy: Qt

        keep.append(OverlayController())
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        application.processEvents()
        time.sleep(0.01)
    _modules_and_indicator.keep = (application, keep)  # type: ignore[attr-defined]  # alive until the process ends
    return {"imported": len(imported), "failed": failed}


def _load_tiny_model(checkpoint: Path) -> None:
    # measured: the children import only what each figure counts (the baseline is a bare interpreter)
    from bench.harness import offline_hub

    offline_hub()
    import transformers

    transformers.utils.logging.set_verbosity_error()
    # measured: the children import only what each figure counts (the baseline is a bare interpreter)
    from bench.screens import desktop_picture
    from holodesk.automation.screen import frame_from_image
    from holodesk.inference.local import LocalBackend
    from holodesk.inference.profiles import get_profile

    backend = LocalBackend(checkpoint, device="cpu", max_tiles=12)
    backend.load()
    profile = get_profile("holotron")
    image = profile.prepare_image(frame_from_image(desktop_picture(1920, 1080)))
    request = profile.navigation_request("Archive every unread newsletter", [], [image])
    backend.generate_detailed(request)
    _load_tiny_model.keep = backend  # type: ignore[attr-defined]


def child(kind: str, checkpoint: Path | None) -> dict[str, Any]:
    """Run in a fresh process: build the state `kind` names, then report its memory."""
    started = time.perf_counter()
    report: dict[str, Any] = {}
    if kind != PYTHON:
        report.update(_modules_and_indicator())
    if kind == TINY_MODEL:
        if checkpoint is None:
            raise ValueError("the tiny model child needs --checkpoint")
        _load_tiny_model(checkpoint)
    time.sleep(0.2)  # let freed pages go back and background threads settle
    report.update(_read_status_mib())
    report["seconds"] = time.perf_counter() - started
    return report


def _run_child(kind: str, checkpoint: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.memory", "--child", kind, "--checkpoint", str(checkpoint)]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    completed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"memory child {kind!r} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def write_app_settings(folder: Path) -> dict[str, str]:
    """A config folder whose holodesk/settings.toml selects the scripted backend; returns the XDG variables.

    The script is a JSONL file of one JSON string (an answer the idle app never asks for). The file
    is read back with holodesk.app.common.settings first: a file the app rejected would make it load the default
    (local) model instead, and the figure would measure something else.
    """
    # measured: the children import only what each figure counts (the baseline is a bare interpreter)
    from holodesk.app.common.settings import read_settings

    script = folder / "answers.jsonl"
    script.write_text(json.dumps(SCRIPTED_ANSWER) + "\n", encoding="utf-8")
    config = folder / "config"
    settings_file = config / "holodesk" / "settings.toml"
    settings_file.parent.mkdir(parents=True, exist_ok=True)
    settings_file.write_text(f'[model]\nbackend = "scripted"\nscript = {json.dumps(str(script))}\n', encoding="utf-8")
    model = read_settings(settings_file).model
    if model.backend != "scripted" or model.script != script:
        raise RuntimeError(f"{settings_file} reads as backend {model.backend!r}, script {model.script}")
    data = folder / "data"
    data.mkdir(exist_ok=True)
    return {"XDG_CONFIG_HOME": str(config), "XDG_DATA_HOME": str(data)}


def _instance_answers(env: dict[str, str]) -> bool:
    trigger = subprocess.run(
        [sys.executable, "-m", "holodesk.app.cli", "trigger", "show"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
    )
    return trigger.returncode == 0


def run_app(xvfb: XvfbServer, folder: Path) -> dict[str, Any]:
    """Start the tray app on `xvfb`, wait until it listens and settles, read its memory, terminate it."""
    folder.mkdir(parents=True)
    env = xvfb.env({**os.environ, **write_app_settings(folder)})
    env["HOLODESK_INSTANCE_NAME"] = f"bench-memory-{os.getpid()}-{time.monotonic_ns()}"
    env["QT_QPA_PLATFORM"] = "xcb"  # the app as a desktop runs it, on the Xvfb
    env["PYTHONUNBUFFERED"] = "1"
    log_path = folder / "app.log"
    started = time.perf_counter()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "holodesk.app.cli"],
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + APP_START_TIMEOUT_S
        while not _instance_answers(env):
            if process.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {process.returncode}" if process.poll() is not None else "not listening"
                tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise RuntimeError(f"holodesk {state} after {time.perf_counter() - started:.0f} s:\n{tail}")
            time.sleep(0.2)
        listening_s = time.perf_counter() - started
        time.sleep(APP_SETTLE_S)
        if process.poll() is not None:
            tail = log_path.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"python -m holodesk.app.cli exited with {process.returncode} while idle:\n{tail}")
        report: dict[str, Any] = _read_status_mib(f"/proc/{process.pid}/status")
        report["seconds"] = listening_s
        return report
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def run(settings: BenchSettings) -> BenchResult:
    # measured: the children import only what each figure counts (the baseline is a bare interpreter)
    from bench.harness import BenchResult, offline_hub, stats_of
    from bench.nemotron_tiny import build_nemotron_tiny
    from holodesk.automation.virtual_display import XvfbError, start_xvfb

    offline_hub()
    result = BenchResult(NAME)
    kinds = list(KINDS)
    xvfb: XvfbServer | None = None
    try:
        xvfb = start_xvfb(1920, 1080)
    except XvfbError as exc:
        kinds.remove(APP)
        result.notes.append(f"{APP} skipped: {exc}")
    reports: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    rounds = 1 if settings.quick else max(2, settings.rounds(3))
    try:
        with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
            checkpoint = build_nemotron_tiny(Path(folder) / "nemotron_tiny")
            for round_index in range(rounds):
                shift = round_index % len(kinds)
                for kind in kinds[shift:] + kinds[:shift]:
                    if kind == APP:
                        assert xvfb is not None
                        report = run_app(xvfb, Path(folder) / f"app-{round_index}")
                    else:
                        report = _run_child(kind, checkpoint)
                    reports[kind].append(report)
    finally:
        if xvfb is not None:
            xvfb.stop()
    for kind in kinds:
        baseline = BASELINES.get(kind)
        result.add(
            f"{kind} RSS", stats_of([r["VmRSS"] for r in reports[kind]], "MiB"), baseline=baseline and f"{baseline} RSS"
        )
        result.add(f"{kind} peak", stats_of([r["VmHWM"] for r in reports[kind]], "MiB"))
        result.extra[kind] = {"start_s": [round(r["seconds"], 2) for r in reports[kind]]}
    if APP in reports:
        started = sorted(r["seconds"] for r in reports[APP])
        result.notes.append(
            f"{APP}: python -m holodesk.app.cli (scripted backend) on a 1920x1080 Xvfb, read {APP_SETTLE_S:g} s after"
            f" `trigger show` first answered ({started[len(started) // 2]:.1f} s after the start, median)"
        )
    modules_report = reports[MODULES][0]
    result.notes.append(
        f"{MODULES} imports {modules_report['imported']} modules of {', '.join(PACKAGES)} (not the command line),"
        " QApplication offscreen, the tray indicator (control window: no tray host) and the overlay controller;"
        f" {TINY_MODEL} adds the tiny checkpoint (CPU, bfloat16) and one step"
    )
    if modules_report["failed"]:
        result.notes.append(f"modules that did not import: {modules_report['failed']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="memory benchmark child process (run by bench.memory)")
    parser.add_argument("--child", choices=CHILDREN, required=True)
    parser.add_argument("--checkpoint", type=Path)
    arguments = parser.parse_args()
    print(json.dumps(child(arguments.child, arguments.checkpoint)))


if __name__ == "__main__":
    main()
