"""`holodesk doctor`: one line per check, each OK or the problem with its fix.

Checks run in order and never raise: a check that cannot run reports why. The exit status is
non-zero only when something blocks the chosen backend (no display blocks everything; no GPU or
no weights block the local backend; an unreachable server blocks the remote one).
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

from holodesk.app.cli.canned_screen import canned_screenshot
from holodesk.app.cli.doctor_report import CheckResult, DoctorOptions, Status, printable
from holodesk.app.cli.model_fit import check_model_fit, total_memory_bytes
from holodesk.app.cli.server_checks import DEFAULT_SCREEN, TaskShape, check_server_fit
from holodesk.app.common.hotkey_path import OWN_WINDOWS_STOP, TRIGGER_ADVICE, HotkeyPath, plan_hotkeys
from holodesk.automation.backends import choose_backend
from holodesk.automation.errors import AutomationError, CaptureError
from holodesk.automation.held_input import release_leftover_input
from holodesk.automation.pyautogui_import import import_pyautogui
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.wayland.portal import probe_remote_desktop
from holodesk.automation.wayland.stream import GST_PACKAGES, load_gstreamer
from holodesk.inference.checkpoint import find_checkpoint
from holodesk.inference.engine.placement import DEFAULT_CONTEXT, free_memory
from holodesk.inference.engine.spec import read_spec, transformers_problem
from holodesk.inference.errors import BackendError, InferenceError, ModelLoadError, ParseError
from holodesk.inference.hardware import MambaPath, detect_hardware
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.qwen35_memory import CheckpointLayoutError, plan_checkpoint
from holodesk.inference.remote import RemoteBackend

if TYPE_CHECKING:
    from holodesk.inference.checkpoint import CheckpointLocation


# The release the in-process engine is tested with (pyproject.toml's holotron extra pins it).
ENGINE_TRANSFORMERS = "5.19.0"


def check_display() -> CheckResult:
    """Which display Holodesk's window and the X11 backend would use; on Wayland, whether XWayland is there."""
    if sys.platform == "darwin":
        return CheckResult("display", Status.OK, "macOS (Quartz)")
    if sys.platform == "win32":
        return CheckResult("display", Status.OK, "Windows")
    wayland = os.environ.get("WAYLAND_DISPLAY")
    x11 = os.environ.get("DISPLAY")
    if wayland:
        # app.gui is the GUI's package: a command-line module loads it only where it is needed
        from holodesk.app.gui.qt_platform import choose_qt_platform

        gui = choose_qt_platform()
        if gui.blocker:
            return CheckResult(
                "display",
                Status.WARN,
                f"Wayland ({wayland}) without XWayland (DISPLAY {'does not answer' if x11 else 'is unset'}): "
                "the tray app's overlay and approval panel need XWayland; `holodesk run` with the terminal "
                "approver works through the desktop portal",
                fix="enable XWayland (GNOME and KDE start it by default), or run tasks with `holodesk run`",
            )
        if gui.warning:
            return CheckResult("display", Status.WARN, gui.warning, fix="unset QT_QPA_PLATFORM")
        return CheckResult("display", Status.OK, f"Wayland ({wayland}); {gui.reason}")
    if x11:
        return CheckResult("display", Status.OK, f"X11 ({x11})")
    return CheckResult(
        "display",
        Status.FAIL,
        "no display: DISPLAY and WAYLAND_DISPLAY are unset",
        fix="run inside a desktop session (or under Xvfb for testing: `xvfb-run holodesk doctor`)",
        blocking=True,
    )


def check_monitors_and_capture() -> Iterator[CheckResult]:
    capture = ScreenCapture()
    try:
        monitors = capture.monitors()
    except CaptureError as exc:
        yield CheckResult("monitors", Status.FAIL, str(exc), fix="check that the display is reachable", blocking=True)
        return
    for monitor in monitors:
        primary = " (primary)" if monitor.is_primary else ""
        yield CheckResult(f"monitor {monitor.index}", Status.OK, f"{monitor}{primary}")
    try:
        start = time.perf_counter()
        frame = capture.grab_monitor(1)
        elapsed_ms = (time.perf_counter() - start) * 1000
    except CaptureError as exc:
        yield CheckResult(
            "capture", Status.FAIL, str(exc), fix="on macOS grant Screen Recording permission", blocking=True
        )
        return
    finally:
        capture.close()
    if not frame.pixels.any():
        yield CheckResult(
            "capture",
            Status.WARN,
            f"monitor 1 grabbed in {elapsed_ms:.0f} ms but every pixel is black",
            fix="on macOS grant Screen Recording permission; elsewhere make sure the screen is not locked",
        )
    else:
        yield CheckResult(
            "capture", Status.OK, f"monitor 1 grabbed ({frame.width}x{frame.height}) in {elapsed_ms:.0f} ms"
        )


def check_input_injection() -> CheckResult:
    """Move the pointer to where it already is: proves injection works without disturbing anything."""
    if sys.platform.startswith("linux") and os.environ.get("DISPLAY"):
        try:
            from Xlib import display as xdisplay

            connection = xdisplay.Display()
            try:
                has_xtest = connection.has_extension("XTEST")
            finally:
                connection.close()
        except Exception as exc:  # python-xlib raises many kinds on a broken display
            return CheckResult("input", Status.FAIL, f"cannot open the X display: {exc}", blocking=True)
        if not has_xtest:
            return CheckResult(
                "input",
                Status.FAIL,
                "the X server has no XTEST extension: input cannot be injected",
                fix="enable XTEST in the X server",
                blocking=True,
            )
    try:
        pyautogui = import_pyautogui()
        x, y = pyautogui.position()
        pyautogui.moveTo(x, y, _pause=False)
    except Exception as exc:  # pyautogui wraps platform errors in many types
        return CheckResult(
            "input",
            Status.FAIL,
            f"pyautogui cannot move the pointer: {exc}",
            fix="on macOS grant Accessibility permission to the terminal or app",
            blocking=True,
        )
    return CheckResult("input", Status.OK, f"pointer injection works (pointer at {x}, {y})")


def check_held_input() -> CheckResult:
    """Release a mouse button or key that a killed `holodesk run` left pressed (see automation.held_input)."""

    leftover = release_leftover_input()
    if leftover.problems:
        return CheckResult(
            "held input",
            Status.WARN,
            leftover.describe(),
            fix="run `holodesk doctor` again on the display where Holodesk ran",
        )
    status = Status.WARN if leftover.buttons or leftover.keys else Status.OK
    return CheckResult("held input", status, leftover.describe())


def check_transformers() -> CheckResult:
    """The in-process engine runs on transformers' native Nemotron-H, tested with ENGINE_TRANSFORMERS."""

    fix = f'pip install "transformers=={ENGINE_TRANSFORMERS}" (or: pip install ".[holotron]")'
    problem = transformers_problem()
    if problem is not None:
        return CheckResult("transformers", Status.FAIL, problem, fix=fix, blocking=True)
    version = importlib.metadata.version("transformers")
    if version != ENGINE_TRANSFORMERS:
        return CheckResult(
            "transformers",
            Status.WARN,
            f"{version} is not the release the in-process engine is tested with ({ENGINE_TRANSFORMERS})",
            fix=fix,
        )
    return CheckResult("transformers", Status.OK, version)


def check_gpu(options: DoctorOptions) -> Iterator[CheckResult]:
    """The local backend's torch, GPU and Mamba kernels (the other backends need none of them)."""

    wants_cuda = options.device == "cuda"
    report = detect_hardware()
    if report.torch.error:
        yield CheckResult(
            "torch",
            Status.FAIL,
            f"PyTorch is not usable: {report.torch.error}",
            fix='pip install ".[holotron]"',
            blocking=True,
        )
    else:
        yield CheckResult("torch", Status.OK, f"{report.torch.version} (CUDA {report.torch.cuda_version or 'none'})")
    if not report.devices:
        reason = report.cuda_error or "no NVIDIA GPU is visible to PyTorch"
        yield CheckResult(
            "cuda",
            Status.FAIL if wants_cuda else Status.INFO,
            f"no CUDA GPU on this machine ({reason})",
            fix="the local backend needs an NVIDIA GPU with about 32 GiB free (L40S / A100 class);"
            " without one, use a shared server: --backend remote --base-url URL"
            if wants_cuda
            else "",
            blocking=wants_cuda,
        )
    for device in report.devices:
        yield CheckResult(f"cuda:{device.index}", Status.OK, device.describe())
    for kernel in report.kernels:
        yield CheckResult(
            "kernel",
            Status.OK if kernel.importable else (Status.WARN if report.devices else Status.INFO),
            kernel.describe(),
            fix='pip install --no-build-isolation ".[cuda]"' if report.devices and not kernel.importable else "",
        )
    slow = report.path is not MambaPath.FAST_CUDA
    yield CheckResult("mamba path", Status.WARN if slow else Status.OK, report.verdict)


def check_model(options: DoctorOptions) -> Iterator[CheckResult]:
    """The weights, the engine's reading of their config, and where they would load, all before loading anything."""
    # looked up when called: tests replace it at its source; heavy: torch
    from holodesk.inference.engine.placement import available_memory_bytes, flash_attention_available, place
    from holodesk.inference.engine.qwen35 import is_qwen35

    try:
        found = find_checkpoint(options.model)
        if is_qwen35(found.path):
            yield from _check_qwen35_model(found, options)
            return
        spec = read_spec(found.path)
    except ModelLoadError as exc:
        yield CheckResult("weights", Status.FAIL, str(exc), blocking=True)
        return
    yield CheckResult("weights", Status.OK, found.describe())
    try:
        placement = place(
            spec,
            options.device,
            None,
            detect_hardware(),
            flash_available=flash_attention_available(),
            cpu_available=available_memory_bytes(),
        )
    except ModelLoadError as exc:
        yield CheckResult("load plan", Status.FAIL, str(exc), blocking=True)
        return
    yield CheckResult(
        "load plan", Status.WARN if placement.notice else Status.OK, placement.describe(), fix=placement.notice or ""
    )
    if options.try_step:
        yield try_one_step(str(found.path), options.device)


def _check_qwen35_model(found: CheckpointLocation, options: DoctorOptions) -> Iterator[CheckResult]:
    """A Qwen3.5 checkpoint (Holo3, Holo3.1, Holo4) for the in-process engine: its memory plan against
    what is free (from its headers, before loading), and with --try one step through the profile."""
    # heavy: torch
    from holodesk.inference.engine.qwen35 import PROFILES

    yield CheckResult("weights", Status.OK, f"{found.describe()}; a Qwen3.5 checkpoint (Holo3, Holo3.1, Holo4)")
    if options.profile not in PROFILES:
        yield CheckResult(
            "profile",
            Status.FAIL,
            f"the {options.profile} profile does not speak this checkpoint's format",
            fix=f"choose one of {', '.join(PROFILES)} (--profile or the settings file's model.profile)",
            blocking=True,
        )
        return
    try:
        plan = plan_checkpoint(found.path)
    except (CheckpointLayoutError, OSError, ValueError) as exc:
        yield CheckResult("load plan", Status.FAIL, f"cannot read the layout of {found.path}: {exc}", blocking=True)
        return
    needed = plan.total(DEFAULT_CONTEXT)
    try:
        room, where = free_memory(options.device, detect_hardware)
    except ModelLoadError as exc:
        yield CheckResult("load plan", Status.FAIL, str(exc), blocking=True)
        return
    if room is not None and needed > room:
        yield CheckResult(
            "load plan",
            Status.FAIL,
            f"needs {plan.describe(DEFAULT_CONTEXT)}, but {where} has {room / 2**30:.1f} GiB free",
            fix="a smaller Holo model, another device, or a vLLM server (--backend remote)",
            blocking=True,
        )
        return
    yield CheckResult("load plan", Status.OK, f"{plan.describe(DEFAULT_CONTEXT)} on {options.device}")
    if options.try_step:
        yield try_local_profile_step(str(found.path), options.device, options.profile)


def try_local_profile_step(model: str, device: str, profile_name: str) -> CheckResult:
    """Load a checkpoint in the in-process backend and propose one step on the canned screenshot through
    `profile_name` (never acted on): the proposal, or why there is none, in words."""
    # looked up when called: tests replace it at its source
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(model, device=device, profile=profile_name)
    try:
        started = time.perf_counter()
        backend.load()
        loaded_in = time.perf_counter() - started
        proposal = ModelPolicy(get_profile(profile_name), backend).propose(
            "Archive the first unread email.",
            [],
            [canned_screenshot()],
        )
    except ParseError as exc:
        return CheckResult(  # blocking: a model whose answers do not parse cannot run a task
            "try",
            Status.FAIL,
            f"loaded in {loaded_in:.1f} s; the model answered, but the answer did not parse: {printable(str(exc))}",
            fix=f"check that the checkpoint is an H Company model for the {profile_name} profile",
            blocking=True,
        )
    except InferenceError as exc:
        return CheckResult("try", Status.FAIL, printable(str(exc), limit=400), blocking=True)
    finally:
        backend.unload()
    timings = proposal.timings
    spent = f"{timings.total_s:.1f} s, {timings.tokens_in} tokens in, {timings.tokens_out} out"
    return CheckResult(
        "try",
        Status.OK,
        f"loaded in {loaded_in:.1f} s (in-process engine); one step ({spent}) proposed:"
        f" {printable(proposal.action.describe())}",
    )


def try_one_step(model: str, device: str) -> CheckResult:
    """Load the model in the in-process backend and run the engine's first contact on a canned screenshot.

    One holotron step is proposed (never acted on); the report says whether the answer is degenerate,
    prefill tokens/s, decode ms/token, peak memory and the kernels in use.
    """
    # heavy: torch; looked up when called: tests replace it at its source
    from holodesk.inference.engine.check import contact_request, first_contact
    from holodesk.inference.local import LocalBackend

    backend = LocalBackend(model, device=device)
    try:
        started = time.perf_counter()
        backend.load()
        loaded_in = time.perf_counter() - started
        report = first_contact(backend.engine, contact_request(canned_screenshot()))
    except InferenceError as exc:
        return CheckResult("try", Status.FAIL, printable(str(exc), limit=400), blocking=True)
    finally:
        backend.unload()
    detail = f"loaded in {loaded_in:.1f} s (in-process engine); " + "; ".join(report.lines())
    if report.problem:
        return CheckResult(
            "try",
            Status.FAIL,
            printable(detail, limit=800),
            fix="a degenerate answer on the real weights means the engine is broken here: report it",
            blocking=True,
        )
    return CheckResult("try", Status.OK, printable(detail, limit=800))


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


def check_desktop_backend(display: CheckResult) -> Iterator[CheckResult]:
    """Which capture + input backend runs and why; on Wayland, whether the portal path is ready.

    Without a display there is no backend to speak of: a bad HOLODESK_BACKEND is still reported, but
    no backend is called OK next to the display's FAIL. Nothing here opens a portal session, so no
    permission dialog shows.
    """

    try:
        choice = choose_backend()
    except AutomationError as exc:
        yield CheckResult("backend", Status.FAIL, str(exc), fix="unset HOLODESK_BACKEND or set x11 / wayland")
        return
    if display.status is Status.FAIL:
        yield CheckResult("backend", Status.INFO, "none without a display: capture, input and hotkeys need one")
        return
    if choice.name == "x11":
        yield CheckResult("backend", Status.OK, f"X11 capture (mss) and input (pyautogui): {choice.reason}")
        yield check_hotkeys()
        return
    yield CheckResult("backend", Status.OK, f"Wayland portal capture and input: {choice.reason}")

    try:
        load_gstreamer()
        yield CheckResult("gstreamer", Status.OK, "GStreamer with pipewiresrc, through PyGObject")
    except AutomationError as exc:
        yield CheckResult("gstreamer", Status.FAIL, str(exc), fix=f"apt install {GST_PACKAGES}", blocking=True)
    try:
        version = probe_remote_desktop()
        yield CheckResult(
            "portal",
            Status.OK,
            f"RemoteDesktop portal version {version}: the first task shows the desktop's permission dialog "
            "(turn on 'Allow remote interaction')"
            + ("" if version >= 2 else "; this portal cannot remember the permission, it asks every run"),
        )
    except AutomationError as exc:
        yield CheckResult(
            "portal",
            Status.FAIL,
            str(exc),
            fix="install xdg-desktop-portal and your desktop's backend (xdg-desktop-portal-gnome / -kde)",
            blocking=True,
        )
    yield check_hotkeys()


def check_hotkeys(probe: Callable[[], int] | None = None) -> CheckResult:
    """Which way the prompt and stop keys reach Holodesk here, and why (asks the portal; no dialog)."""

    plan = plan_hotkeys(probe)
    if plan.path is HotkeyPath.PYNPUT:
        try:
            import pynput.keyboard  # noqa: F401 - raises ImportError when it cannot reach the display
        except ImportError as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return CheckResult("hotkeys", Status.WARN, f"pynput cannot listen: {reason}", fix=TRIGGER_ADVICE)
        return CheckResult("hotkeys", Status.OK, f"global hotkeys through pynput: {plan.reason}")
    if plan.path is HotkeyPath.PORTAL:
        return CheckResult(
            "hotkeys",
            Status.OK,
            f"the desktop binds the prompt and stop shortcuts ({plan.reason}); the tray app asks it at start "
            f"and says which keys it got (the desktop may show a dialog); {OWN_WINDOWS_STOP}",
        )
    return CheckResult(
        "hotkeys", Status.INFO, f"no global hotkeys: {plan.reason}; {OWN_WINDOWS_STOP}", fix=TRIGGER_ADVICE
    )


def run_checks(options: DoctorOptions) -> Iterator[CheckResult]:
    """Every check, in the order a user would fix things."""
    display = check_display()
    yield display
    yield from _guarded("backend", lambda: check_desktop_backend(display))
    if display.status is not Status.FAIL and _x11_backend_chosen():
        # mss and pyautogui: on a Wayland session they would test XWayland, not what Holodesk uses.
        yield from _guarded("monitors", check_monitors_and_capture)
        yield from _guarded("input", lambda: iter([check_input_injection()]))
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
        shape = TaskShape(options.profile, options.max_steps, _screen_size())
        yield from _guarded("context", lambda: check_server_fit(options, shape))


def _screen_size() -> tuple[int, int]:
    """The first monitor's size in pixels (what a task's screenshots have), 1920x1080 when unknown."""

    if not (os.environ.get("DISPLAY") and _x11_backend_chosen()):
        return DEFAULT_SCREEN
    capture = ScreenCapture()
    try:
        rect = capture.monitors()[0].rect
        return (rect.width, rect.height)
    except (CaptureError, IndexError):
        return DEFAULT_SCREEN
    finally:
        capture.close()


def _x11_backend_chosen() -> bool:
    try:
        return choose_backend().name == "x11"
    except AutomationError:
        return True  # the backend line says what is wrong with HOLODESK_BACKEND


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
