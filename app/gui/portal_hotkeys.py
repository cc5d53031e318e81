"""The tray app's prompt and stop shortcuts through the desktop portal (Wayland), with the outcome in words.

Binding may show the desktop's dialog and wait for the user, so it runs on a worker thread; the
portal's presses arrive on the session's own thread. Both reach the GUI thread as queued Qt signals.
Whatever happens (bound, partly bound, refused, no portal) the user hears it through `notice`, with
the `holodesk trigger` fallback where the desktop did not bind a key. Each routine's hotkey is one
more shortcut in the same session (id `routine:<name>`), so the desktop lists and may rebind it too.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping

from holodesk.app.common.hotkey_path import OWN_WINDOWS_STOP, TRIGGER_ADVICE
from holodesk.app.gui.qt import QtCore, Signal
from holodesk.automation.wayland.portal import ConsentRefused, PortalError
from holodesk.automation.wayland.shortcuts import (
    PROMPT_SHORTCUT,
    STOP_SHORTCUT,
    BoundShortcut,
    GlobalShortcutsSession,
    ShortcutRequest,
    preferred_trigger,
)

log = logging.getLogger(__name__)

PROMPT_DESCRIPTION = "Holodesk: open the task prompt"
STOP_DESCRIPTION = "Holodesk: stop the running task"
FALLBACK_COMMAND = {PROMPT_SHORTCUT: "`holodesk trigger`", STOP_SHORTCUT: "`holodesk trigger stop`"}
ROUTINE_SHORTCUT_PREFIX = "routine:"


def shortcut_requests(
    prompt_hotkey: str, stop_key: str, stop_presses: int, routine_hotkeys: Mapping[str, str] | None = None
) -> list[ShortcutRequest]:
    """What to ask the desktop for. The stop gesture becomes a preferred trigger only as a single press:
    "Esc twice" has no form in the shortcuts specification, so the desktop (or the user) picks its keys.
    `routine_hotkeys` maps a hotkey to the routine it starts."""
    stop_trigger = preferred_trigger(stop_key) if stop_presses == 1 else None
    return [
        ShortcutRequest(PROMPT_SHORTCUT, PROMPT_DESCRIPTION, preferred_trigger(prompt_hotkey)),
        ShortcutRequest(STOP_SHORTCUT, STOP_DESCRIPTION, stop_trigger),
        *(
            ShortcutRequest(f"{ROUTINE_SHORTCUT_PREFIX}{name}", routine_description(name), preferred_trigger(hotkey))
            for hotkey, name in (routine_hotkeys or {}).items()
        ),
    ]


def routine_description(name: str) -> str:
    return f"Holodesk: run the routine {name!r}"


def bound_in_words(bound: tuple[BoundShortcut, ...]) -> str:
    """What the desktop bound, and the command to bind by hand for what it did not."""
    triggers = {shortcut.id: shortcut.trigger for shortcut in bound}
    lines = []
    for shortcut in bound:
        if shortcut.id.startswith(ROUTINE_SHORTCUT_PREFIX):
            name = shortcut.id.removeprefix(ROUTINE_SHORTCUT_PREFIX)
            assigned = shortcut.trigger or "no keys yet; assign them in the desktop's shortcut settings"
            lines.append(f"{routine_description(name)}: {assigned}")
    for shortcut_id, description in ((PROMPT_SHORTCUT, PROMPT_DESCRIPTION), (STOP_SHORTCUT, STOP_DESCRIPTION)):
        keys = triggers.get(shortcut_id)
        if keys:
            lines.append(f"{description}: {keys}")
        else:
            lines.append(
                f"{description}: no keys yet; assign them in the desktop's shortcut settings, "
                f"or bind a desktop shortcut to {FALLBACK_COMMAND[shortcut_id]}"
            )
    return "The desktop bound Holodesk's shortcuts. " + "; ".join(lines) + f". Also, {OWN_WINDOWS_STOP}."


class PortalHotkeys(QtCore.QObject):
    """One GlobalShortcuts session for the app's life (or until the hotkey settings change)."""

    prompt_requested = Signal()
    stop_requested = Signal()
    routine_requested = Signal(str)  # the routine's name
    notice = Signal(str, str)  # title, text

    def __init__(self, bus_address: str = "SESSION", parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self._bus_address = bus_address
        self._session: GlobalShortcutsSession | None = None
        self._lock = threading.Lock()
        self._generation = 0  # a bind that finishes after stop() or a newer start() is closed at once

    def start(self, requests: list[ShortcutRequest]) -> None:
        """Bind on a worker thread; the outcome comes as `notice`."""
        self.stop()
        with self._lock:
            self._generation += 1
            generation = self._generation
        threading.Thread(
            target=self._bind, args=(requests, generation), name="holodesk-bind-shortcuts", daemon=True
        ).start()

    def stop(self) -> None:
        with self._lock:
            self._generation += 1
            session, self._session = self._session, None
        if session is not None:
            session.close()

    @property
    def active(self) -> bool:
        return self._session is not None

    def _bind(self, requests: list[ShortcutRequest], generation: int) -> None:
        try:
            session = GlobalShortcutsSession.open(requests, self._on_activated, bus_address=self._bus_address)
        except ConsentRefused as exc:
            self.notice.emit("Global shortcuts not bound", f"{exc}. To use the keyboard instead, {TRIGGER_ADVICE}.")
            return
        except PortalError as exc:
            log.warning("global shortcuts through the portal failed: %s", exc)
            self.notice.emit("Global shortcuts unavailable", f"{exc}. {TRIGGER_ADVICE[0].upper()}{TRIGGER_ADVICE[1:]}.")
            return
        try:
            bound = session.list_shortcuts()  # what the desktop holds now (KDE's settings may have changed it)
        except PortalError as exc:
            log.warning("listing the bound shortcuts failed: %s", exc)
            bound = session.bound  # what BindShortcuts answered
        with self._lock:
            current = generation == self._generation
            if current:
                self._session = session
        if not current:
            session.close()
            return
        self.notice.emit("Global shortcuts", bound_in_words(bound))

    def _on_activated(self, shortcut_id: str) -> None:
        if shortcut_id == PROMPT_SHORTCUT:
            self.prompt_requested.emit()
        elif shortcut_id == STOP_SHORTCUT:
            self.stop_requested.emit()
        elif shortcut_id.startswith(ROUTINE_SHORTCUT_PREFIX):
            self.routine_requested.emit(shortcut_id.removeprefix(ROUTINE_SHORTCUT_PREFIX))
        else:
            log.info("ignored an unknown shortcut from the portal: %r", shortcut_id[:40])
