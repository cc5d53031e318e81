"""Remember on disk what an action may hold down, so that a killed run never leaves input stuck.

While the input backend performs an action that presses something (a click, a drag, typing, a key
combination), a marker file in the user's private runtime folder names the mouse buttons and keys
the action may hold, the X display and the process id. The marker is removed when the action ends,
whatever way it ends. Only a process killed outright (kill -9, a crash of the interpreter) leaves
it behind, and then a button may still be pressed on the X server. The next `holodesk run`, the tray
app or `holodesk doctor` calls `release_leftover_input()`: for every marker of a dead process on
this display it asks the X server what is really held, releases those of the marker's buttons and
keys that are (through the input layer: automation/input/x11/release.py), and removes the marker.
On a wlroots desktop the pointer writes the same markers under its Wayland display's name, and the same
call releases the buttons they name through a new virtual pointer (automation/input/wlroots/release.py:
the compositor cannot be asked what is held).

Key names are pyautogui's (what the X11 backend passes to pyautogui keyDown/write); keycodes are X keycodes (what
the X11 typer presses); buttons are X button numbers. A second marker names the spare keycodes the
X11 typer bound to keysyms, for as long as they stay bound; the same call clears them.

A marker that cannot be written stops the action before its first key or button (MarkerUnavailable, an
AutomationError the backend reports in words): input nobody could repair after a kill is not sent.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from holodesk.automation.errors import AutomationError
from holodesk.automation.input.x11.release import HeldInput, release_held
from holodesk.automation.private_dir import user_runtime_dir

log = logging.getLogger(__name__)

MARKER_PREFIX = "held-input-"
REMAPPED_PREFIX = "remapped-keys-"
BUTTON_NUMBERS = {"left": 1, "middle": 2, "right": 3}


class MarkerUnavailable(AutomationError):
    """The crash marker for an action could not be written (an unsafe or unwritable runtime folder), so the
    action was not performed: after a kill nothing could release or unbind what it pressed."""


def _display_tag(display: str | None) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", display or "default")


@dataclass(frozen=True, slots=True)
class LeftoverRelease:
    """What `release_leftover_input` found and did, for a log line or `holodesk doctor`."""

    markers: int = 0  # markers of dead processes found for this display
    buttons: tuple[int, ...] = ()  # buttons that were still held and were released
    keys: tuple[str, ...] = ()  # keys that were still held and were released
    problems: tuple[str, ...] = field(default_factory=tuple)
    cleared_keycodes: tuple[int, ...] = ()  # spare keycodes a killed run had bound, cleared again

    def describe(self) -> str:
        if not self.markers:
            if self.problems:  # the markers could not even be looked for: say why, never "nothing held"
                return "; ".join(self.problems)
            return "no input was left held by an earlier run"
        released = [f"mouse button {b}" for b in self.buttons] + [f"key {k!r}" for k in self.keys]
        if self.cleared_keycodes:
            released.append(f"the temporary binding of {len(self.cleared_keycodes)} spare keycodes")
        text = (
            f"released what a killed run left held: {', '.join(released)}"
            if released
            else "a killed run's marker was found; nothing was still held"
        )
        return text + "".join(f"; {problem}" for problem in self.problems)


class HeldInputMarker:
    """Writes and removes this process's marker. `folder` defaults to the private runtime folder.

    Blocks nest (an action holding a button around typing that holds keys): the marker names the
    union of every open block and goes when the last one closes.
    """

    def __init__(self, folder: Path | None = None, display: str | None = None) -> None:
        self._folder = folder
        self.display = display if display is not None else os.environ.get("DISPLAY")
        self._open: list[tuple[list[int], list[str], list[int]]] = []
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        folder = self._folder if self._folder is not None else user_runtime_dir()
        return folder / f"{MARKER_PREFIX}{_display_tag(self.display)}-{os.getpid()}.json"

    @contextmanager
    def holding(
        self, buttons: Iterable[int] = (), keys: Iterable[str] = (), keycodes: Iterable[int] = ()
    ) -> Iterator[None]:
        """Mark `buttons`, `keys` (names) and `keycodes` as possibly held for the duration of the block."""
        entry = (sorted(set(buttons)), sorted(set(keys)), sorted(set(keycodes)))
        if not any(entry):
            yield
            return
        with self._lock:
            self._open.append(entry)
            try:
                self._write()
            except MarkerUnavailable:
                self._open.remove(entry)
                raise
        try:
            yield
        finally:
            with self._lock:
                self._open.remove(entry)
                self._write()

    def _write(self) -> None:
        """Write the union of the open blocks, or remove the marker when none is open.

        MarkerUnavailable when a block opens and its marker cannot be written; a failed removal is logged.
        """
        try:
            path = self.path
            if not self._open:
                with suppress(FileNotFoundError):
                    path.unlink()
                return
            record = {
                "pid": os.getpid(),
                "display": self.display,
                "buttons": sorted({b for entry in self._open for b in entry[0]}),
                "keys": sorted({k for entry in self._open for k in entry[1]}),
                "keycodes": sorted({c for entry in self._open for c in entry[2]}),
                "time": time.time(),
            }
            # No fsync: the marker guards against the process dying, and the page cache outlives the process.
            temp = path.with_name(path.name + ".part")
            temp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(temp, path)
        except OSError as exc:
            if self._open:
                raise MarkerUnavailable(f"cannot write the held-input marker, so nothing was pressed: {exc}") from exc
            log.warning("cannot remove the held-input marker: %s", exc)


class RemappedKeysMarker:
    """Names the spare keycodes this process bound to keysyms, for as long as they stay bound.

    The X11 typer keeps bindings between actions (see automation.input.x11.keyboard); a process killed
    meanwhile leaves them, and `release_leftover_input` clears those still holding their keysym.
    """

    def __init__(self, folder: Path | None = None, display: str | None = None) -> None:
        self._folder = folder
        self.display = display if display is not None else os.environ.get("DISPLAY")

    @property
    def path(self) -> Path:
        folder = self._folder if self._folder is not None else user_runtime_dir()
        return folder / f"{REMAPPED_PREFIX}{_display_tag(self.display)}-{os.getpid()}.json"

    def record(self, bound: dict[int, int]) -> None:
        """Name `bound` (keycode -> keysym) as bound now; an empty mapping removes the marker.

        MarkerUnavailable when a binding cannot be named on disk (the typer then types nothing with it).
        """
        try:
            path = self.path
            if not bound:
                with suppress(FileNotFoundError):
                    path.unlink()
                return
            record = {"pid": os.getpid(), "display": self.display, "bound": {str(k): v for k, v in bound.items()}}
            temp = path.with_name(path.name + ".part")
            temp.write_text(json.dumps(record), encoding="utf-8")
            os.replace(temp, path)
        except OSError as exc:
            if bound:
                raise MarkerUnavailable(f"cannot write the rebound-keys marker, so nothing was typed: {exc}") from exc
            log.warning("cannot remove the rebound-keys marker: %s", exc)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # our own marker from before: we are not in an action while recovering
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def leftover_markers(
    folder: Path | None = None, display: str | None = None, prefix: str = MARKER_PREFIX
) -> list[tuple[Path, dict[str, Any]]]:
    """Markers for `display` whose process is gone, with their content (an unreadable marker counts as empty)."""
    folder = folder if folder is not None else user_runtime_dir()
    display = display if display is not None else os.environ.get("DISPLAY")
    found: list[tuple[Path, dict[str, Any]]] = []
    for path in sorted(folder.glob(f"{prefix}{_display_tag(display)}-*.json")):
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            record, pid = {}, int(path.stem.rsplit("-", 1)[-1]) if path.stem.rsplit("-", 1)[-1].isdigit() else -1
        if pid > 0 and _alive(pid):
            continue  # a run in progress: what it holds is its own business
        found.append((path, record if isinstance(record, dict) else {}))
    return found


def release_leftover_input(folder: Path | None = None, display: str | None = None) -> LeftoverRelease:
    """Release what killed runs left held or bound on this X display and on this Wayland display (wlroots),
    and remove their markers. Never raises."""
    on_x11 = _release_leftover_x11(folder, display)
    # Local: the wlroots pointer writes its markers through this module (a cycle if imported at the top).
    from holodesk.automation.input.wlroots.release import release_leftover_buttons

    on_wlroots = release_leftover_buttons(folder)
    return LeftoverRelease(
        on_x11.markers + on_wlroots.markers,
        on_x11.buttons + on_wlroots.buttons,
        on_x11.keys,
        on_x11.problems + on_wlroots.problems,
        on_x11.cleared_keycodes,
    )


def _release_leftover_x11(folder: Path | None, display: str | None) -> LeftoverRelease:
    display = display if display is not None else os.environ.get("DISPLAY")
    try:
        markers = leftover_markers(folder, display) + leftover_markers(folder, display, REMAPPED_PREFIX)
    except OSError as exc:
        return LeftoverRelease(problems=(f"cannot look for held-input markers: {exc}",))
    if not markers:
        return LeftoverRelease()
    buttons = sorted({int(b) for _, record in markers for b in record.get("buttons", []) if str(b).isdigit()})
    keys = sorted({str(k) for _, record in markers for k in record.get("keys", [])})
    keycodes = sorted({int(c) for _, record in markers for c in record.get("keycodes", []) if str(c).isdigit()})
    bound: dict[int, int] = {}
    for _, record in markers:
        entries = record.get("bound", {})
        if isinstance(entries, dict):
            bound.update({int(k): int(v) for k, v in entries.items() if str(k).isdigit() and isinstance(v, int)})
    problems: list[str] = []
    try:
        released = release_held(HeldInput(tuple(buttons), tuple(keys), tuple(keycodes), bound), display)
    except Exception as exc:  # no display, a refused connection: keep the markers for the next try
        problems.append(f"could not release held input: {type(exc).__name__}: {exc}")
        return LeftoverRelease(len(markers), problems=tuple(problems))
    for path, _ in markers:
        with suppress(FileNotFoundError):
            path.unlink()
    result = LeftoverRelease(len(markers), released.buttons, released.keys, tuple(problems), released.cleared_keycodes)
    log.warning("%s", result.describe())
    return result
