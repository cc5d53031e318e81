"""Figure 3: from a proposal arriving to its marker painted, with the app's OverlayController.

A child process (Qt must not outlive the X server it talks to) runs a QApplication on a
1920x1080 Xvfb showing `desktop_picture` and, interleaved, for click proposals at changing targets:
- paint on image: `holodesk.app.gui.overlay_drawing.render_scene` alone - QPainter drawing the marker (crosshair, dot,
  label) onto a transparent full-screen QImage: the floor, and the baseline;
- render + mask: the same plus `painted_region` (the window mask computed from the image), which is
  the work `OverlayWindow.set_scene` does before anything reaches the screen;
- show -> painted: `OverlayController.show_proposal` (on the GUI thread) until the overlay
  window's paintEvent has returned;
- signal -> on screen: the proposal emitted from a worker thread (as the engine thread hands it to
  the GUI through a queued signal) until the marker's centre pixel reads MARKER_COLOUR in an X
  grab of the screen: what a user can see. Polled with 1-pixel mss grabs while processing events.
Between samples the overlay is cleared and the marker seen gone from the screen.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.harness import BenchResult, BenchSettings, stats_of
from bench.screens import desktop_display
from holodesk.automation.action_picture import MARKER_COLOUR
from holodesk.automation.actions import Click, Point
from holodesk.automation.coords import Monitor, Rect

NAME = "overlay"
CASES = ("paint on image", "render + mask", "show -> painted", "signal -> on screen")
TIMEOUT_S = 5.0
REPO_ROOT = Path(__file__).resolve().parent.parent


def child(rounds: int, warmup: int) -> dict[str, list[float]]:
    """Run in a process whose $DISPLAY is the benchmark's Xvfb; returns milliseconds per case."""
    import mss

    # heavy: Qt
    from holodesk.app.gui.overlay import OverlayController, OverlayWindow
    from holodesk.app.gui.overlay_drawing import OverlayScene, painted_region, render_scene
    from holodesk.app.gui.qt import QtCore, QtGui, QtWidgets, Signal

    application = QtWidgets.QApplication.instance() or QtWidgets.QApplication([])
    controller = OverlayController()
    painted: list[float] = []
    original_paint = OverlayWindow.paintEvent

    def timed_paint(window: OverlayWindow, event: QtGui.QPaintEvent) -> None:
        original_paint(window, event)
        painted.append(time.perf_counter())

    OverlayWindow.paintEvent = timed_paint  # type: ignore[method-assign]  # timestamps the end of each paint

    class Courier(QtCore.QObject):
        proposal = Signal(object)

    courier = Courier()
    courier.proposal.connect(lambda action: controller.show_proposal(1, action))  # queued: emitted off-thread
    grabber = mss.mss()
    screen = QtGui.QGuiApplication.primaryScreen()
    size = screen.geometry().size()
    monitor = Monitor(1, Rect(0, 0, size.width(), size.height()))
    marker = tuple(MARKER_COLOUR)

    def pixel(point: Point) -> tuple[int, int, int]:
        shot = grabber.grab({"left": point.x, "top": point.y, "width": 1, "height": 1})
        blue, green, red = shot.raw[0], shot.raw[1], shot.raw[2]
        return red, green, blue

    def wait_until(condition: Any) -> None:
        deadline = time.perf_counter() + TIMEOUT_S
        while not condition():
            if time.perf_counter() > deadline:
                raise TimeoutError("the overlay did not reach the expected state in time")
            application.processEvents(QtCore.QEventLoop.ProcessEventsFlag.AllEvents, 1)

    def target(index: int) -> Point:
        return Point(300 + (index * 211) % 1300, 200 + (index * 137) % 700)

    def clear(point: Point) -> None:
        controller.clear()
        wait_until(lambda: pixel(point) != marker)

    def paint_on_image(point: Point) -> float:
        scene = OverlayScene(1, Click(point), point)
        started = time.perf_counter()
        render_scene(scene, monitor, QtCore.QPoint(0, 0), size)
        return time.perf_counter() - started

    def render_and_mask(point: Point) -> float:
        scene = OverlayScene(1, Click(point), point)
        started = time.perf_counter()
        painted_region(render_scene(scene, monitor, QtCore.QPoint(0, 0), size), size)
        return time.perf_counter() - started

    def show_until_painted(point: Point) -> float:
        painted.clear()
        started = time.perf_counter()
        controller.show_proposal(1, Click(point))
        wait_until(lambda: bool(painted))
        elapsed = painted[0] - started
        wait_until(lambda: pixel(point) == marker)
        clear(point)
        return elapsed

    def signal_until_on_screen(point: Point) -> float:
        started = time.perf_counter()
        sender = threading.Thread(target=courier.proposal.emit, args=(Click(point),))
        sender.start()
        wait_until(lambda: pixel(point) == marker)
        elapsed = time.perf_counter() - started
        sender.join()
        clear(point)
        return elapsed

    measures = {
        "paint on image": paint_on_image,
        "render + mask": render_and_mask,
        "show -> painted": show_until_painted,
        "signal -> on screen": signal_until_on_screen,
    }
    samples: dict[str, list[float]] = {name: [] for name in CASES}
    for round_index in range(warmup + rounds):
        shift = round_index % len(CASES)
        for name in CASES[shift:] + CASES[:shift]:
            seconds = measures[name](target(round_index * len(CASES) + CASES.index(name)))
            if round_index >= warmup:
                samples[name].append(seconds * 1000)
    grabber.close()
    return samples


def run(settings: BenchSettings) -> BenchResult:
    result = BenchResult(NAME)
    rounds = settings.rounds(15)
    with desktop_display(1920, 1080) as server:
        command = [sys.executable, "-m", "bench.overlay", "--rounds", str(rounds), "--warmup", str(settings.warmup)]
        env = server.env()
        env.pop("QT_QPA_PLATFORM", None)  # a real xcb window on the Xvfb, not offscreen
        completed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300)
    if completed.returncode != 0:
        raise RuntimeError(f"overlay child failed:\n{completed.stderr[-3000:]}")
    samples = json.loads(completed.stdout.strip().splitlines()[-1])
    baseline = "paint on image"
    for name in CASES:
        result.add(name, stats_of(samples[name]), baseline=None if name == baseline else baseline)
    result.notes.append(
        "app/overlay.py's OverlayController on a 1920x1080 Xvfb (no compositor, no window manager),"
        " editable click proposals (overlay window + handle window); 'on screen' = the target pixel"
        " reads the marker colour in an X grab"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description="overlay benchmark child process (run by bench.overlay)")
    parser.add_argument("--rounds", type=int, required=True)
    parser.add_argument("--warmup", type=int, default=2)
    arguments = parser.parse_args()
    os.environ.pop("QT_QPA_PLATFORM", None)
    print(json.dumps(child(arguments.rounds, arguments.warmup)))


if __name__ == "__main__":
    main()
