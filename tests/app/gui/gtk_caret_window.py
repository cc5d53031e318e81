"""A tall GTK 3 window with one text entry near its top, for the caret tests (tests/app/gui/test_caret_place.py).

Usage: python tests/app/gui/gtk_caret_window.py X Y WIDTH HEIGHT ENTRY_TOP TEXT CARET [SELECTED_FROM]
(PyGObject and GTK 3's typelib from Debian: python3-gi, gir1.2-gtk-3.0). The window is placed at
(X, Y) with no window manager's help; the entry sits ENTRY_TOP pixels below its top, 40 px in from
either side, holds TEXT with the caret after its first CARET characters (and the text from
SELECTED_FROM up to the caret selected, as a dialog preselects its text). JSON lines on stdout:
  shown    once the window is active (it has the X focus) and the entry has the keyboard focus:
           "entry": the entry's rectangle on the screen (root pixels), and "caret": where GTK itself
           draws its caret, [x, top, height] on the screen, from the entry's own text layout;
           "selected_from": the x where the selection starts, the same way (null without one)
Commands on stdin: "quit" (or a closed stdin).
"""

from __future__ import annotations

import json
import sys

import gi

gi.require_version("Gtk", "3.0")
from gi.repository import GLib, Gtk, Pango  # noqa: E402 - after the version pin


def main() -> int:
    x, y, width, height, entry_top = (int(value) for value in sys.argv[1:6])
    text, caret = sys.argv[6], int(sys.argv[7])
    selected_from = int(sys.argv[8]) if len(sys.argv) > 8 else None
    window = Gtk.Window(title="holodesk caret target")
    window.set_decorated(False)
    window.set_default_size(width, height)
    window.move(x, y)
    fixed = Gtk.Fixed()
    entry = Gtk.Entry()
    entry.set_text(text)
    entry.set_size_request(width - 80, -1)
    fixed.put(entry, 40, entry_top)
    window.add(fixed)
    window.connect("destroy", lambda _window: Gtk.main_quit())
    reported = [False]

    def report(*_args: object) -> bool:
        if reported[0] or not (window.is_active() and entry.has_focus()):
            return False
        entry.set_position(caret)  # focusing selects the whole text: place the caret after that
        if selected_from is not None:
            entry.select_region(selected_from, caret)
        origin = window.get_window().get_origin()
        left, top = entry.translate_coordinates(window, 0, 0)
        allocation = entry.get_allocation()
        screen_left, screen_top = origin.x + left, origin.y + top
        # Where GTK draws the caret: the layout's offset in the entry, then the cursor's position in the layout.
        layout_x, layout_y = entry.get_layout_offsets()
        screen_x = origin.x + left + layout_x

        def layout_at(characters: int) -> Pango.Rectangle:
            index = entry.text_index_to_layout_index(len(text[:characters].encode("utf-8")))
            return entry.get_layout().get_cursor_pos(index)[0]

        strong = layout_at(caret)
        emit(
            {
                "event": "shown",
                "entry": [screen_left, screen_top, allocation.width, allocation.height],
                "caret": [
                    screen_x + strong.x // Pango.SCALE,
                    origin.y + top + layout_y + strong.y // Pango.SCALE,
                    strong.height // Pango.SCALE,
                ],
                "selected_from": None
                if selected_from is None
                else screen_x + layout_at(selected_from).x // Pango.SCALE,
            }
        )
        reported[0] = True
        return False

    # Active once it has the X focus (the test gives it); the entry is its focus widget from the start.
    window.connect("notify::is-active", lambda *_args: GLib.idle_add(report) and None)

    def on_command(_channel: GLib.IOChannel, _condition: GLib.IOCondition) -> bool:
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            Gtk.main_quit()
            return False
        return True

    GLib.io_add_watch(
        GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.PRIORITY_DEFAULT, GLib.IO_IN | GLib.IO_HUP, on_command
    )
    window.show_all()
    entry.grab_focus()
    Gtk.main()
    return 0


def emit(record: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    raise SystemExit(main())
