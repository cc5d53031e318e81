"""Capture and input latency on Wayland (headless GNOME: mutter 43 + the portal) next to X11 (Xvfb).

Both desktops are 1280x800 and show a still picture. Figures, per backend:
- grab: `grab(1)` of the frame source the engine uses (X11: an mss grab; Wayland: the newest frame
  the PipeWire stream delivered, already in memory);
- click: `execute(Click)` on an empty spot of the desktop (X11: pyautogui/XTEST; Wayland: the
  portal's NotifyPointerMotionAbsolute + two NotifyPointerButton calls over D-Bus);
- move to new frame: a pointer move, then wait until a frame showing the change exists (Wayland: the
  next frame from the stream, the pointer being embedded in it; X11: a grab after the move, which
  is synchronous - the floor). This is what the engine's settle logic waits on after an action.
- keymap check: reading the keyboard layout that text is checked against before typing (X11: the
  core keymap over Xlib; Wayland: the compositor's wl_keyboard keymap, compiled by libxkbcommon).

The headless GNOME stack and its consent answer come from bench.rigs (gnome_stack, mutter_remote), the
same stack the tests run on: the bench measures on exactly the desktop the tests prove correct. The
stack is test equipment (it answers the product's permission dialog, which product code must never do).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from bench.harness import BenchResult, BenchSettings, Stats, interleaved
from bench.rigs.gnome_stack import DEBIAN_PACKAGES, GnomeStack, answer_consent, missing_components
from bench.rigs.mutter_remote import MutterRemote
from holodesk.automation.actions import Click, Move, Point
from holodesk.automation.input.performer import InputPerformer
from holodesk.automation.input.portal.backend import PortalInput
from holodesk.automation.input.x11.backend import X11Input
from holodesk.automation.input.x11.keyboard import X11Typer
from holodesk.automation.screen import ScreenCapture
from holodesk.automation.virtual_display import DisplayLayout, xvfb_display
from holodesk.automation.wayland.capture import WaylandCapture
from holodesk.automation.wayland.keymap import compositor_keymap
from holodesk.automation.wayland.session import WaylandSession

NAME = "wayland"
SIZE = (1280, 800)
ROUNDS = 30


def _x11(settings: BenchSettings) -> dict[str, Stats]:
    with xvfb_display(DisplayLayout(*SIZE)):
        capture = ScreenCapture()
        input_performer = InputPerformer(X11Input(capture=capture))
        typer = X11Typer()
        points = [Point(300, 300), Point(700, 500)]
        state = {"i": 0}

        def move_then_grab() -> None:
            state["i"] += 1
            input_performer.execute(Move(points[state["i"] % 2]))
            capture.grab(1)

        try:
            stats = interleaved(
                {
                    "grab": lambda: capture.grab(1),
                    "click": lambda: input_performer.execute(Click(Point(640, 400))),
                    "move to new frame": move_then_grab,
                    "keymap check": typer.keymap,
                },
                settings.rounds(ROUNDS),
                settings.warmup,
            )
        finally:
            typer.close()
            capture.close()
    return stats


def _wayland(settings: BenchSettings) -> tuple[dict[str, Stats], float]:
    """Timings on a fresh headless GNOME stack, and the portal session's start (consent answered) in ms."""
    import os

    with GnomeStack() as stack:
        variables = ("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "WAYLAND_DISPLAY")
        saved = {key: os.environ.get(key) for key in variables}
        os.environ.update({key: stack.env()[key] for key in saved})
        remote = MutterRemote(stack.bus_address, str(stack.runtime_dir))
        session = WaylandSession()
        try:
            failure: list[BaseException] = []

            def start() -> None:
                try:
                    session.started()
                except BaseException as exc:
                    failure.append(exc)

            worker = threading.Thread(target=start, daemon=True)
            started_at = time.perf_counter()
            worker.start()
            answer_consent(remote)
            worker.join(30)
            if failure or worker.is_alive():
                raise RuntimeError(f"the portal session did not start: {failure}")
            start_ms = (time.perf_counter() - started_at) * 1000
            capture = WaylandCapture(session)
            input_performer = InputPerformer(PortalInput(session))
            frames = session.started()[1][0].frames
            input_performer.execute(Move(Point(10, 10)))  # warm the virtual devices up (not timed)
            points = [Point(300, 300), Point(700, 500)]
            state = {"i": 0}

            def move_until_new_frame() -> None:
                state["i"] += 1
                before = frames.frames_received
                input_performer.execute(Move(points[state["i"] % 2]))
                if not frames.wait_for_frame_after(before, 2.0):
                    raise RuntimeError("no new frame within 2 s of a pointer move")

            cases: dict[str, Callable[[], object]] = {
                "grab": lambda: capture.grab(1),
                "click": lambda: input_performer.execute(Click(Point(640, 400))),
                "move to new frame": move_until_new_frame,
                "keymap check": compositor_keymap,
            }
            stats = interleaved(cases, settings.rounds(ROUNDS), settings.warmup)
        finally:
            session.close()
            remote.close()
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return stats, start_ms


def run(settings: BenchSettings) -> BenchResult:
    result = BenchResult(NAME)
    missing = missing_components()
    if missing:
        result.notes.append(f"skipped: the headless GNOME stack needs {', '.join(missing)} (apt: {DEBIAN_PACKAGES})")
        return result
    x11 = _x11(settings)
    wayland, start_ms = _wayland(settings)
    for case in ("grab", "click", "move to new frame", "keymap check"):
        baseline = f"X11 {case}"
        result.add(baseline, x11[case])
        result.add(f"Wayland {case}", wayland[case], baseline=baseline)
    result.notes.append(
        f"{SIZE[0]}x{SIZE[1]}; X11 = Xvfb + mss + pyautogui, Wayland = headless mutter 43 + "
        "xdg-desktop-portal-gnome (portal over D-Bus, frames over PipeWire/GStreamer)"
    )
    result.notes.append(
        f"Wayland session start incl. the test answering the consent dialog and the first frame: {start_ms:.0f} ms"
    )
    return result
