"""The AT-SPI side of reading the caret's place: a small program of its own, run by app/gui/caret_place.py.

Why a process of its own: libatspi aborts the whole process (a GLib error, not an exception) when no
accessibility bus can be reached, and its calls block for as long as a hung application keeps them;
neither may happen to the tray. Here each call is also bounded by AT-SPI's own timeout.

Usage: python -I caret_atspi.py (this file alone: it imports nothing of Holodesk, so the system's
Python can run it where Holodesk's own venv cannot import gi. PyGObject with Atspi 2.0's typelib:
python3-gi and gir1.2-atspi-2.0 on Debian; the accessibility bus of the session, found as libatspi finds it:
AT_SPI_BUS_ADDRESS, the X root window's AT_SPI_BUS, or org.a11y.Bus on the D-Bus session bus).

JSON lines. First, on stdout: {"event": "ready"}, or {"event": "unavailable", "reason": str} and the
program ends ("missing": "gi" in it when this Python has no PyGObject or no Atspi typelib). Then for
each request {"id": N, "pid": P} on stdin, one answer:
  {"id": N, "caret": [x, y, w, h], "field": [...], "window": [...]}   the focused object of the
        application whose process is P: its caret (the character at the caret offset, in the
        toolkit's screen coordinates, widened back to the start of a selection on its line, which
        typing replaces; the field's own top line when it is empty), the field's own rectangle and
        that of the window it is in (for the caller to tell the toolkit's scale)
  {"id": N, "none": str}    why there is no caret: no such application, nothing focused, no Text
A closed stdin ends the program.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

CALL_TIMEOUT_MS = 250  # each AT-SPI call; a hung application answers nothing sooner
WALK_LIMIT = 600  # accessible objects looked at when the application has no Collection interface
WALK_BUDGET_S = 1.0  # and the time that walk may take
EMPTY_FIELD_ROWS = 40  # an empty field's caret: its top band (about one line and the field's padding)


def emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


class CaretFinder:
    """The AT-SPI queries; `atspi` and `glib` are gi.repository's Atspi and GLib (untyped modules)."""

    def __init__(self, atspi: Any, glib: Any) -> None:
        self.atspi = atspi
        self.glib = glib

    def answer(self, pid: int) -> dict[str, Any]:
        try:
            return self._answer(pid)
        except self.glib.Error as exc:  # the application went away, or did not answer in time
            if "timeout" in exc.message:
                return {"none": f"the application did not answer AT-SPI within {CALL_TIMEOUT_MS} ms"}
            return {"none": f"AT-SPI: {exc.message}"}

    def _answer(self, pid: int) -> dict[str, Any]:
        atspi = self.atspi
        desktop = atspi.get_desktop(0)
        app = None
        for index in range(desktop.get_child_count()):
            child = desktop.get_child_at_index(index)
            if child is not None and child.get_process_id() == pid:
                app = child
                break
        if app is None:
            return {"none": f"no accessible application has process {pid}"}
        focused = self._focused(app)
        if focused is None:
            return {"none": "the application has no focused object"}
        if "Text" not in focused.get_interfaces():
            return {"none": f"the focused {focused.get_role_name()} has no Text interface"}
        screen = atspi.CoordType.SCREEN
        field = atspi.Component.get_extents(focused, screen)
        offset = atspi.Text.get_caret_offset(focused)
        count = atspi.Text.get_character_count(focused)
        caret = None
        if count > 0 and offset >= 0:
            at = atspi.Text.get_character_extents(focused, min(offset, count), screen)
            if at.height > 0 and (at.x, at.y) != (0, 0):
                caret = [at.x, at.y, max(at.width, 2), at.height]
            elif (
                offset > 0
            ):  # after the last character: some toolkits give nothing there, so its left neighbour's right edge
                before = atspi.Text.get_character_extents(focused, offset - 1, screen)
                if before.height > 0:
                    caret = [before.x + before.width, before.y, 2, before.height]
        if caret is None:  # an empty field: the caret is on its first line
            caret = [field.x, field.y, field.width, min(field.height, EMPTY_FIELD_ROWS)]
        elif atspi.Text.get_n_selections(focused) > 0:
            # Typed text replaces a selection (a dialog's preselected text): from its start, on the caret's line.
            start = atspi.Text.get_selection(focused, 0).start_offset
            at = atspi.Text.get_character_extents(focused, start, screen)
            if at.height > 0 and at.y == caret[1] and at.x < caret[0]:
                caret = [at.x, caret[1], caret[0] + caret[2] - at.x, caret[3]]
        window = atspi.Component.get_extents(self._top_level(focused), screen)
        return {
            "caret": caret,
            "field": [field.x, field.y, field.width, field.height],
            "window": [window.x, window.y, window.width, window.height],
        }

    def _top_level(self, node: Any) -> Any:
        """The window `node` is in: its last ancestor below the application."""
        for _ in range(64):
            parent = node.get_parent()
            if parent is None or parent.get_role() == self.atspi.Role.APPLICATION:
                break
            node = parent
        return node

    def _focused(self, app: Any) -> Any:
        """The application's focused object: one Collection query where the toolkit offers it (GTK),
        else a walk over its showing objects, bounded in count and time (libatspi answers a call that
        times out there with an empty value, not an error). A Collection query that times out (a hung
        application) ends the search at once."""
        atspi = self.atspi
        states = atspi.StateSet.new([atspi.StateType.FOCUSED])
        everything = atspi.CollectionMatchType.ALL
        rule = atspi.MatchRule.new(states, everything, {}, everything, [], everything, [], everything, False)
        try:
            found = atspi.Collection.get_matches(app, rule, atspi.CollectionSortOrder.CANONICAL, 1, True)
            return found[0] if found else None
        except self.glib.Error as exc:
            if "timeout" in exc.message:  # libatspi's "timeout from dbind": a hung application, walk nothing
                raise
        pending = [app]
        seen = 0
        ends = time.monotonic() + WALK_BUDGET_S
        while pending and seen < WALK_LIMIT and time.monotonic() < ends:
            node = pending.pop()
            seen += 1
            state = node.get_state_set()
            if node is not app and state.contains(atspi.StateType.FOCUSED):
                return node
            if node is app or state.contains(atspi.StateType.SHOWING):
                count = node.get_child_count()
                pending.extend(child for child in (node.get_child_at_index(i) for i in range(count)) if child)
        return None


def main() -> int:
    try:
        import gi

        gi.require_version("Atspi", "2.0")
        from gi.repository import Atspi, GLib
    except (ImportError, ValueError) as exc:
        reason = f"no AT-SPI for Python ({exc}): install python3-gi and gir1.2-atspi-2.0"
        emit({"event": "unavailable", "missing": "gi", "reason": reason})
        return 1
    Atspi.set_timeout(CALL_TIMEOUT_MS, 0)
    if Atspi.init() == 2:  # libatspi's "no D-Bus session bus"; asking it anything now would abort
        emit({"event": "unavailable", "reason": "no D-Bus session bus to find the accessibility bus on"})
        return 1
    # Reaches the accessibility bus now: without one, libatspi ends this process here, before "ready".
    Atspi.get_desktop(0).get_child_count()
    finder = CaretFinder(Atspi, GLib)
    loop = GLib.MainLoop()

    def on_request(channel: Any, _condition: Any) -> bool:
        line = channel.readline()
        if not line:
            loop.quit()
            return False
        request = json.loads(line)
        emit({"id": request["id"], **finder.answer(int(request["pid"]))})
        return True

    # A main loop rather than a blocking read: AT-SPI's own messages are handled between requests.
    stdin = GLib.IOChannel.unix_new(sys.stdin.fileno())
    GLib.io_add_watch(stdin, GLib.PRIORITY_DEFAULT, GLib.IOCondition.IN | GLib.IOCondition.HUP, on_request)
    emit({"event": "ready"})
    loop.run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
