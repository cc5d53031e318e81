"""Figure 5: resident memory of the idle app, and with the tiny model loaded, each in a fresh process.

`holodesk`'s tray entry point (app/main.py) is not there yet, so "app idle" is what it will hold
at rest: a process that imports every module of app/, automation/ and inference/ (torch and
transformers are imported lazily by those modules and so are not loaded), creates the
QApplication (offscreen platform) with the tray indicator (the control window where no tray host
runs, as here) and the overlay controller, and then idles through the event loop for a moment.
"app idle + tiny model" is the same process after loading the tiny checkpoint with LocalBackend
(CPU, float32: torch and transformers imported, remote code loaded) and running one step on a
1920x1080 screenshot. Baseline: a bare Python interpreter. Figures are VmRSS after settling and
VmHWM (the peak) from /proc/self/status, in MiB, the children run interleaved.
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

NAME = "memory"
CHILDREN = ("python", "app idle", "app idle + tiny model")
PACKAGES = ("app", "automation", "inference")
# Subcommand modules that only the command line loads, one at a time; the tray app does not import them.
NOT_IN_THE_TRAY_APP = frozenset({"app.cli"})
REPO_ROOT = Path(__file__).resolve().parent.parent


def _status_mib() -> dict[str, float]:
    """VmRSS and VmHWM of this process, in MiB."""
    values: dict[str, float] = {}
    with open("/proc/self/status", encoding="utf-8") as status:
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
            if module.name in NOT_IN_THE_TRAY_APP:
                continue
            try:
                importlib.import_module(module.name)
                imported.append(module.name)
            except Exception as exc:  # a module being written in parallel may not import yet: say so
                failed[module.name] = f"{type(exc).__name__}: {exc}"
    return imported, failed


def _idle_app() -> dict[str, Any]:
    """Build the app's idle state (see the module docstring); returns what was imported."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    imported, failed = _import_app_modules()
    from app.app_state import AppState
    from app.qt import QtGui, QtWidgets
    from app.tray import make_indicator

    application = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])

    def icon_for(state: AppState) -> QtGui.QIcon:
        pixmap = QtGui.QPixmap(32, 32)
        pixmap.fill(QtGui.QColor("#3b82f6"))
        return QtGui.QIcon(pixmap)

    keep: list[Any] = [make_indicator(icon_for)]
    if "app.overlay" in imported:
        from app.overlay import OverlayController

        keep.append(OverlayController())
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        application.processEvents()
        time.sleep(0.01)
    _idle_app.keep = (application, keep)  # type: ignore[attr-defined]  # alive until the process ends
    return {"imported": len(imported), "failed": failed}


def _load_tiny_model(checkpoint: Path) -> None:
    from tests.support.tiny_vlm import isolate_hf_environment

    isolate_hf_environment()
    import transformers

    transformers.utils.logging.set_verbosity_error()
    from automation.screen import frame_from_image
    from bench.screens import desktop_picture
    from inference.local import LocalBackend
    from inference.profiles import get_profile

    backend = LocalBackend(checkpoint, device="cpu", dtype="float32", max_tiles=12)
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
    if kind != "python":
        report.update(_idle_app())
    if kind == "app idle + tiny model":
        if checkpoint is None:
            raise ValueError("the tiny model child needs --checkpoint")
        _load_tiny_model(checkpoint)
    time.sleep(0.2)  # let freed pages go back and background threads settle
    report.update(_status_mib())
    report["seconds"] = time.perf_counter() - started
    return report


def _run_child(kind: str, checkpoint: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.memory", "--child", kind, "--checkpoint", str(checkpoint)]
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    completed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"memory child {kind!r} failed:\n{completed.stderr[-2000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def run(settings: BenchSettings) -> BenchResult:
    from bench.harness import BenchResult, stats_of
    from tests.support.tiny_vlm import build_tiny_checkpoint, isolate_hf_environment

    isolate_hf_environment()
    result = BenchResult(NAME)
    reports: dict[str, list[dict[str, Any]]] = {kind: [] for kind in CHILDREN}
    rounds = 1 if settings.quick else max(2, settings.rounds(3))
    with tempfile.TemporaryDirectory(prefix="holodesk-bench-") as folder:
        checkpoint = build_tiny_checkpoint(Path(folder))
        for round_index in range(rounds):
            shift = round_index % len(CHILDREN)
            for kind in CHILDREN[shift:] + CHILDREN[:shift]:
                reports[kind].append(_run_child(kind, checkpoint))
    for kind in CHILDREN:
        baseline = None if kind == "python" else "python RSS"
        if kind == "app idle + tiny model":
            baseline = "app idle RSS"
        result.add(f"{kind} RSS", stats_of([r["VmRSS"] for r in reports[kind]], "MiB"), baseline=baseline)
        result.add(f"{kind} peak", stats_of([r["VmHWM"] for r in reports[kind]], "MiB"))
        result.extra[kind] = {"start_s": [round(r["seconds"], 2) for r in reports[kind]]}
    app_report = reports["app idle"][0]
    result.notes.append(
        f"app idle imports {app_report['imported']} modules of {', '.join(PACKAGES)} (not app.cli),"
        " QApplication offscreen, the tray indicator (control window: no tray host) and the overlay controller"
    )
    if app_report["failed"]:
        result.notes.append(f"modules that did not import: {app_report['failed']}")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="memory benchmark child process (run by bench.memory)")
    parser.add_argument("--child", choices=CHILDREN, required=True)
    parser.add_argument("--checkpoint", type=Path)
    arguments = parser.parse_args()
    print(json.dumps(child(arguments.child, arguments.checkpoint)))


if __name__ == "__main__":
    main()
