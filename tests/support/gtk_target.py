"""A native Wayland GTK 3 text entry that logs what it receives, for the headless GNOME tests.

Usage: GDK_BACKEND=wayland python -m tests.support.gtk_target (PyGObject and GTK 3's typelib come
from Debian: python3-gi, gir1.2-gtk-3.0). The window goes full screen with one entry and writes
JSON lines:
  shown    once mapped: the GDK display's type (GdkWaylandDisplay when native) and the entry's
           rectangle in window = screen coordinates
  focused  when the window is active and the entry has the keyboard focus (after "shown")
  text     the entry's full content after each change
  key      each key press the entry was given: its character (or key name), whether Shift was down,
           its keycode
  key_up   each key release: the keycode
  cleared  the entry was emptied by the "clear" command (no key was sent)
Commands on stdin: "clear", "quit".
"""

from __future__ import annotations

import json
import sys
from typing import Any

import gi

gi.require_version("Gdk", "3.0")
gi.require_version("Gtk", "3.0")
from gi.repository import Gdk, GLib, Gtk  # noqa: E402 - after the version pins


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def main() -> int:
    window = Gtk.Window(title="holodesk gtk target")
    entry = Gtk.Entry()
    box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, margin=200)
    box.pack_start(entry, False, False, 0)
    window.add(box)
    entry.connect("changed", lambda widget: emit({"event": "text", "text": widget.get_text()}))

    def report_key(_widget: Gtk.Widget, event: Gdk.EventKey) -> bool:
        # What the program was told, for a failure report: the character and whether Shift was down.
        shift = bool(event.state & Gdk.ModifierType.SHIFT_MASK)
        character = Gdk.keyval_to_unicode(event.keyval)
        text = chr(character) if character else Gdk.keyval_name(event.keyval)
        emit({"event": "key", "text": text, "shift": shift, "code": event.hardware_keycode})
        return False

    entry.connect("key-press-event", report_key)
    entry.connect("key-release-event", lambda _w, event: emit({"event": "key_up", "code": event.hardware_keycode}))
    window.connect("destroy", lambda _window: Gtk.main_quit())
    focused = [False]
    shown = [False]

    def report_focus(*_args: object) -> None:
        now = shown[0] and window.is_active() and entry.has_focus()  # "focused" never comes before "shown"
        if now and not focused[0]:
            emit({"event": "focused"})
        focused[0] = now

    window.connect("notify::is-active", report_focus)
    entry.connect("focus-in-event", lambda *_args: GLib.idle_add(report_focus) and False)

    def report_shown(*_args: object) -> bool:
        allocation = entry.get_allocation()
        emit(
            {
                "event": "shown",
                "display": type(Gdk.Display.get_default()).__name__,
                "entry": [allocation.x, allocation.y, allocation.width, allocation.height],
            }
        )
        shown[0] = True
        report_focus()
        return False

    window.connect("map-event", lambda *_args: GLib.timeout_add(50, report_shown) and False)

    def on_command(_channel: GLib.IOChannel, _condition: GLib.IOCondition) -> bool:
        line = sys.stdin.readline()
        command = line.strip()
        if not line or command == "quit":
            Gtk.main_quit()
            return False
        if command == "clear":
            entry.set_text("")
            emit({"event": "cleared"})
        return True

    GLib.io_add_watch(GLib.IOChannel.unix_new(sys.stdin.fileno()), GLib.PRIORITY_DEFAULT, GLib.IO_IN, on_command)
    window.fullscreen()
    window.show_all()
    entry.grab_focus()
    Gtk.main()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
