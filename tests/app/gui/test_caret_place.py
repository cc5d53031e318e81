"""The caret's place through AT-SPI, and the approval panel and typing bubble kept off it (issue 49).

Real parts: the module's Xvfb, a D-Bus session bus of the test's own (dbus-daemon; the accessibility
bus is D-Bus activated from it, at-spi-bus-launcher and at-spi2-registryd from at-spi2-core), a GTK 3
window (tests/app/gui/gtk_caret_window.py) whose text entry sits near the top of a window nearly as
tall as the screen, and Holodesk's panel and overlay in tests/support/overlay_probe.py. Where the
caret is comes from GTK itself: the entry reports where it draws it, from its own text layout.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from holodesk.app.gui.caret_place import CaretReader
from holodesk.app.gui.focused_area import typing_place
from holodesk.app.gui.keep_clear import Box, panel_spot, text_rows, typed_area
from holodesk.automation.coords import Rect
from holodesk.automation.virtual_display import DisplayLayout, XvfbServer
from tests.support.overlay_probe import OverlayProbe
from tests.support.waiting import wait_until

GTK_WINDOW = Path(__file__).with_name("gtk_caret_window.py")
SCREEN = DisplayLayout(1280, 800)
# A window nearly as tall as the screen, its entry near its top: a caret the window's bottom rows miss.
WINDOW = Rect(20, 20, 1240, 760)
ENTRY_TOP = 40  # below the window's top
TEXT = "hello caret, typed high up"
CARET = 5  # after "hello"
NEAR_PX = 40  # the bubble's gap to the caret's line, at most

pytestmark = pytest.mark.parametrize("xvfb", [SCREEN], indirect=True, ids=str, scope="module")


def meets(a: Box, b: Box) -> bool:
    return a.overlap(b) > 0


def box(rect: Rect | list[int]) -> Box:
    return Box(*rect) if isinstance(rect, list) else Box(rect.left, rect.top, rect.width, rect.height)


# -- the parts ---------------------------------------------------------------------------------------


def root_property(display: str, name: str, delete: bool = False) -> bool:
    """Whether the X root window carries `name` (at-spi-bus-launcher puts AT_SPI_BUS there); `delete` removes it."""
    from Xlib import X
    from Xlib import display as xdisplay

    connection = xdisplay.Display(display)
    try:
        root = connection.screen().root
        atom = connection.intern_atom(name)
        present = root.get_full_property(atom, X.AnyPropertyType) is not None
        if delete:
            root.delete_property(atom)
            connection.sync()
        return present
    finally:
        connection.close()


@pytest.fixture(scope="module")
def session_bus(xvfb: XvfbServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A D-Bus session bus of the test's own, named in DBUS_SESSION_BUS_ADDRESS while the module runs."""
    folder = tmp_path_factory.mktemp("bus")
    daemon = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--nopidfile", f"--address=unix:dir={folder}", "--print-address=1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**xvfb.env(), "HOME": str(folder)},
        start_new_session=True,  # its activated services (the accessibility bus) in its process group
    )
    assert daemon.stdout is not None
    address = daemon.stdout.readline().strip()
    assert address, "dbus-daemon printed no address"
    saved = {name: os.environ.get(name) for name in ("DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS")}
    os.environ["DBUS_SESSION_BUS_ADDRESS"] = address
    os.environ.pop("AT_SPI_BUS_ADDRESS", None)
    try:
        yield address
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(timeout=10)
        root_property(xvfb.display, "AT_SPI_BUS", delete=True)


class GtkCaretWindow:
    """tests/app/gui/gtk_caret_window.py, running; `shown` is its report once it has the focus."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.shown: dict[str, list[int]] = {}

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    @property
    def entry(self) -> Box:
        return box(self.shown["entry"])


@contextmanager
def gtk_caret_window(
    display: str, env: dict[str, str] | None = None, selected_from: int | None = None, window: Rect = WINDOW
) -> Iterator[GtkCaretWindow]:
    """The GTK window at WINDOW, given the X input focus (as a click would); yields once it reports its
    entry focused."""
    from Xlib import X
    from Xlib import display as xdisplay

    arguments = [str(n) for n in (window.left, window.top, window.width, window.height, ENTRY_TOP)]
    process = subprocess.Popen(
        [sys.executable, str(GTK_WINDOW), *arguments, TEXT, str(CARET)]
        + ([] if selected_from is None else [str(selected_from)]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    gtk = GtkCaretWindow(process)
    connection = xdisplay.Display(display)
    try:
        root = connection.screen().root

        def toplevel() -> object | None:
            # A root child, or under a window manager's frame (for a look with openbox).
            for child in root.query_tree().children:
                for candidate in (child, *child.query_tree().children):
                    viewable = candidate.get_attributes().map_state == X.IsViewable
                    if candidate.get_wm_name() == "holodesk caret target" and viewable:
                        return candidate
            return None

        wait_until(lambda: toplevel() is not None, 30, "the GTK window mapped")
        toplevel().set_input_focus(X.RevertToParent, X.CurrentTime)  # type: ignore[union-attr]
        connection.sync()
        shown = json.loads(gtk.lines.get(timeout=30))
        assert shown["event"] == "shown", shown
        gtk.shown = shown
        yield gtk
    finally:
        connection.close()
        if process.poll() is None:
            os.kill(process.pid, signal.SIGCONT)  # a test may have stopped it
            assert process.stdin is not None
            process.stdin.close()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


# -- no accessibility bus (first: before the module's bus exists) ---------------------------------------


@pytest.mark.display
def test_without_an_accessibility_bus_the_windows_bottom_rows_are_kept_clear(
    xvfb: XvfbServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    root_property(xvfb.display, "AT_SPI_BUS", delete=True)
    reader = CaretReader()
    try:
        with gtk_caret_window(xvfb.display):
            started = time.monotonic()
            place = typing_place(reader=reader)
            took = time.monotonic() - started
            started = time.monotonic()
            again = typing_place(reader=reader)
            took_again = time.monotonic() - started
    finally:
        reader.close()
    assert place is not None and place.window == WINDOW
    assert place.caret is None and again == place, (place, again)
    assert took < reader.start_wait_s + 1.0, f"the read took {took:.2f} s"
    # The helper ends for want of a bus, saying why; the reader does not start another at once.
    assert "accessibility bus" in reader.last_reason, reader.last_reason
    assert took_again < 0.1, f"a second read without a bus took {took_again:.2f} s"
    assert typed_area(box(place.window), None) == text_rows(box(place.window))


# -- with the test's own accessibility bus -------------------------------------------------------------


@pytest.fixture(scope="module")
def reader(session_bus: str) -> Iterator[CaretReader]:
    started = CaretReader()
    try:
        yield started
    finally:
        started.close()


@pytest.mark.display
def test_the_caret_read_is_where_gtk_draws_it(xvfb: XvfbServer, reader: CaretReader) -> None:
    with gtk_caret_window(xvfb.display) as gtk:
        place = typing_place(reader=reader)
        started = time.monotonic()
        again = typing_place(reader=reader)
        took = time.monotonic() - started
    assert place is not None and place.caret is not None, reader.last_reason
    assert place == again
    caret_x, caret_top, caret_height = gtk.shown["caret"]
    caret = place.caret
    assert place.window == WINDOW
    assert place.field is not None and box(place.field) == gtk.entry
    assert abs(caret.left - caret_x) <= 1, f"AT-SPI's caret {caret} is not where GTK draws it, x={caret_x}"
    assert abs(caret.top - caret_top) <= 2 and abs(caret.height - caret_height) <= 3, (caret, gtk.shown)
    assert gtk.entry.overlap(box(caret)) == caret.width * caret.height, "the caret lies outside the entry"
    print(f"AT-SPI caret read (X focus, pid, helper round trip): {took * 1000:.1f} ms")


@pytest.mark.display
def test_a_toolkit_scaled_by_two_gives_its_caret_in_x_pixels(xvfb: XvfbServer, reader: CaretReader) -> None:
    # GTK 3 under GDK_SCALE=2 tells AT-SPI (and this test) its coordinates halved.
    logical = Rect(100, 50, 500, 350)
    with gtk_caret_window(xvfb.display, env={**os.environ, "GDK_SCALE": "2"}, window=logical) as gtk:
        place = typing_place(reader=reader)
    assert place is not None and place.window == Rect(200, 100, 1000, 700), place
    assert place.caret is not None, reader.last_reason
    caret_x, caret_top, caret_height = gtk.shown["caret"]
    assert abs(place.caret.left - 2 * caret_x) <= 2, f"{place.caret} is not at GTK's caret x={caret_x} doubled"
    assert abs(place.caret.top - 2 * caret_top) <= 4 and abs(place.caret.height - 2 * caret_height) <= 6
    entry = gtk.entry
    assert place.field == Rect(*(2 * int(n) for n in (entry.left, entry.top, entry.width, entry.height)))


@pytest.mark.display
def test_a_selection_the_typing_replaces_is_part_of_the_caret(xvfb: XvfbServer, reader: CaretReader) -> None:
    with gtk_caret_window(xvfb.display, selected_from=1) as gtk:  # "ello" selected, the caret after it
        place = typing_place(reader=reader)
    assert place is not None and place.caret is not None, reader.last_reason
    caret_x = gtk.shown["caret"][0]
    selected_from = gtk.shown["selected_from"]
    assert isinstance(selected_from, int) and selected_from < caret_x - 10, gtk.shown
    assert abs(place.caret.left - selected_from) <= 1, (
        f"{place.caret} starts not where the selection does, x={selected_from}"
    )
    # It ends with the character at the caret (as without a selection), a space here.
    assert caret_x <= place.caret.right <= caret_x + 8, f"{place.caret} ends not at the caret, x={caret_x}"


@pytest.mark.display
def test_an_application_without_accessibility_gives_no_caret(xvfb: XvfbServer, reader: CaretReader) -> None:
    with gtk_caret_window(xvfb.display, env={**os.environ, "NO_AT_BRIDGE": "1"}):
        place = typing_place(reader=reader)
    assert place is not None and place.window == WINDOW and place.caret is None
    assert "no accessible application has process" in reader.last_reason, reader.last_reason


@pytest.mark.display
def test_a_hung_application_costs_one_deadline_and_the_caret_comes_back(xvfb: XvfbServer, reader: CaretReader) -> None:
    with gtk_caret_window(xvfb.display) as gtk:
        assert typing_place(reader=reader) is not None
        os.kill(gtk.process.pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            place = typing_place(reader=reader)
            took = time.monotonic() - started
            assert place is not None and place.window == WINDOW and place.caret is None
            assert took < 0.5, f"a read on a hung application took {took:.2f} s"
            print(f"a hung application: no caret after {took * 1000:.0f} ms ({reader.last_reason})")
            started = time.monotonic()
            assert typing_place(reader=reader) == place  # asked again while it hangs: bounded again
            assert time.monotonic() - started < 0.5
        finally:
            os.kill(gtk.process.pid, signal.SIGCONT)

        def caret_again() -> bool:
            found = typing_place(reader=reader)
            return found is not None and found.caret is not None

        wait_until(caret_again, 30, f"the caret read again once the application answers ({reader.last_reason})")


@pytest.fixture(scope="module")
def probe(session_bus: str) -> Iterator[OverlayProbe]:
    started = OverlayProbe.start()  # after the bus: its approver's caret helper finds it
    try:
        yield started
    finally:
        started.close()


@pytest.mark.display
@pytest.mark.parametrize("step", ["type", "key"])
def test_the_panel_and_the_bubble_keep_a_high_caret_clear(xvfb: XvfbServer, probe: OverlayProbe, step: str) -> None:
    action = {"kind": "type", "text": "hello"} if step == "type" else {"kind": "key", "keys": ["ctrl", "a"]}
    with gtk_caret_window(xvfb.display) as gtk:
        probe.send({"cmd": "decide", "step": 4, "action": action})
        shown = probe.wait_for("panel", 20)
        probe.send({"cmd": "cancel"})
        probe.wait_for("decided", 20)
    caret_x, caret_top, caret_height = gtk.shown["caret"]
    entry = gtk.entry
    # What must stay visible: the entry's text line, from the caret on (where the typed text goes).
    line = Box(caret_x, caret_top, entry.right - caret_x, caret_height)
    panel = box(shown["window"])
    assert not meets(panel, line), f"the panel {panel} covers the caret's line {line}"
    (bubble,) = [box(rect) for rect in shown["drawn"]]
    assert not meets(bubble, line), f"the bubble {bubble} covers the caret's line {line}"
    assert not meets(bubble, panel), f"the panel {panel} covers the bubble {bubble}"
    across = max(bubble.left - line.right, line.left - bubble.right, 0)
    down = max(bubble.top - line.bottom, line.top - bubble.bottom, 0)
    assert across <= NEAR_PX and down <= NEAR_PX, f"the bubble {bubble} is far from the caret's line {line}"
    # The case is one the window's bottom rows alone get wrong: kept clear of them, the panel takes the
    # top of the screen, over the entry.
    old_left, old_top = panel_spot(
        box([0, 0, SCREEN.width, SCREEN.height]), panel.width, panel.height, [text_rows(box(WINDOW))]
    )
    assert meets(Box(old_left, old_top, panel.width, panel.height), line)
