"""`holodesk doctor`: one line per check, each OK or the problem with its fix; this module runs them.

Checks run in order and never raise: a check that cannot run reports why. The exit status is
non-zero only when something blocks the chosen backend (no display blocks everything; no GPU or
no weights block the local backend; an unreachable server blocks the remote one). The checks
themselves: the desktop's in doctor_desktop, the in-process model's in doctor_model, the memory plan in
model_fit, a server's context in server_checks; the report's types in doctor_report.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from holodesk.app.cli.doctor_desktop import (
    check_desktop_backend,
    check_display,
    check_held_input,
    check_input_injection,
    check_monitors_and_capture,
    screen_size,
    wlroots_backend_chosen,
    x11_backend_chosen,
)
from holodesk.app.cli.doctor_model import (
    check_gpu,
    check_model,
    check_transformers,
)
from holodesk.app.cli.doctor_report import CheckResult, DoctorOptions, Status
from holodesk.app.cli.model_fit import check_model_fit, total_memory_bytes
from holodesk.app.cli.server_checks import TaskShape, check_server_fit
from holodesk.inference.errors import BackendError
from holodesk.inference.hardware import detect_hardware
from holodesk.inference.remote import RemoteBackend


def check_server(options: DoctorOptions) -> CheckResult:
    if not options.base_url:
        return CheckResult(
            "server", Status.FAIL, "no server URL given", fix="pass --base-url http://HOST:8000/v1", blocking=True
        )
    try:
        found = RemoteBackend(options.base_url, model=options.model).check_server()
    except BackendError as exc:
        return CheckResult("server", Status.FAIL, str(exc), blocking=True)
    if not found.ok:
        return CheckResult("server", Status.FAIL, f"{found.base_url}: {found.problem}", blocking=True)
    key = f", key from {found.api_key_source}" if found.api_key_source else ", no API key"
    return CheckResult("server", Status.OK, f"{found.base_url} serves {found.model}{key}")


def run_checks(options: DoctorOptions) -> Iterator[CheckResult]:
    """Every check, in the order a user would fix things."""
    display = check_display()
    yield display
    yield from _guarded("backend", lambda: check_desktop_backend(display))
    if display.status is not Status.FAIL and x11_backend_chosen():
        # mss and pyautogui: on a Wayland session they would test XWayland, not what Holodesk uses.
        yield from _guarded("monitors", check_monitors_and_capture)
        yield from _guarded("input", lambda: iter([check_input_injection()]))
        yield from _guarded("held input", lambda: iter([check_held_input()]))
    elif wlroots_backend_chosen():  # a run killed mid-drag on sway leaves its button down there too
        yield from _guarded("held input", lambda: iter([check_held_input()]))
    if options.backend == "local":
        yield check_transformers()
        yield from _guarded("cuda", lambda: check_gpu(options))
        yield from _guarded("weights", lambda: check_model(options))
    else:  # the GPU-less install has no transformers or kernels, and needs none
        yield CheckResult(
            "gpu", Status.INFO, f"torch, CUDA and mamba-ssm are not needed for the {options.backend} backend"
        )
    yield from _guarded("model memory", lambda: _model_fit(options))
    if options.backend == "remote":
        yield from _guarded("server", lambda: _remote_checks(options))
    # scripted: replays recorded answers; nothing to check beyond the desktop


def _model_fit(options: DoctorOptions) -> Iterator[CheckResult]:
    """Which Holo model fits this machine's memory; the GPUs are probed only where torch is wanted (local)."""

    gpus = None
    if options.backend == "local":
        gpus = detect_hardware().devices
    return check_model_fit(total_memory_bytes(), gpus)


def _remote_checks(options: DoctorOptions) -> Iterator[CheckResult]:
    """The server answers; then whether a task fits it, and with --try one step through it."""
    server = check_server(options)
    yield server
    if server.status is Status.OK:
        shape = TaskShape(options.profile, options.max_steps, screen_size())
        yield from _guarded("context", lambda: check_server_fit(options, shape))


def _guarded(name: str, make: Callable[[], Iterator[CheckResult]]) -> Iterator[CheckResult]:
    # A crashing check is itself a finding; it must not hide the checks after it.
    try:
        yield from make()
    except Exception as exc:  # a crashing check is itself a finding, whatever it raised
        yield CheckResult(name, Status.FAIL, f"check crashed: {type(exc).__name__}: {exc}", blocking=True)


def run_doctor(options: DoctorOptions, out: TextIO = sys.stdout) -> int:
    """Print the report; 0 when nothing blocks the chosen backend, 1 otherwise."""
    blocked = False
    out.write(f"holodesk doctor: backend {options.backend}\n")
    for result in run_checks(options):
        out.write(result.line() + "\n")
        out.flush()
        blocked = blocked or result.blocking
    verdict = "blocked: fix the FAIL lines above" if blocked else "ready"
    out.write(f"{verdict} (backend {options.backend})\n")
    return 1 if blocked else 0
