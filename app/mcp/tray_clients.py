"""The MCP clients the tray app serves: each connection handed over on its single-instance socket runs its
own MCP server session, on a thread of its own, on a desk built from the tray app's parts.

The desk is the tray's: its approver and overlay show every step, its capture hides its own windows, its
model answers `run_task` and `locate`, and a DeskTurn shared with the tray's own tasks lets one run at a
time. A client that goes away mid-step stops its step, as `holodesk mcp` alone does; the tray's Stop stops
the step of every client; quitting the tray ends every session, each step stopped and recorded first.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Callable

import anyio

from holodesk.app.mcp.desk import Desk

log = logging.getLogger(__name__)

CLIENT_GONE = "stopped: the MCP client went away"
STEP_END_WAIT_S = 5.0  # how long a stopped step may take to record its end when its session ends


class TrayClients:
    """Serves each handed-over connection (`serve`, from the GUI thread) until it or the tray ends."""

    def __init__(self, make_desk: Callable[[], Desk], say: Callable[[str], None]) -> None:
        self._make_desk = make_desk  # called on the GUI thread, so it reads the tray's current settings
        self._say = say  # a fault of a client's session, in words (any thread)
        self._lock = threading.Lock()
        self._served: dict[socket.socket, Desk] = {}
        self._threads: list[threading.Thread] = []

    def serve(self, connection: socket.socket, already_read: bytes) -> None:
        desk = self._make_desk()
        with self._lock:
            self._served[connection] = desk
            self._threads = [thread for thread in self._threads if thread.is_alive()]
            thread = threading.Thread(
                target=self._serve_one, args=(connection, already_read, desk), name="holodesk-mcp-client", daemon=True
            )
            self._threads.append(thread)
        thread.start()

    @property
    def connected(self) -> int:
        with self._lock:
            return len(self._served)

    def desks(self) -> list[Desk]:
        with self._lock:
            return list(self._served.values())

    def stop_runs(self, reason: str) -> None:
        """Stop every client's run in progress (the tray's Stop); the clients stay connected."""
        for desk in self.desks():
            desk.steps.stop(reason)

    def close(self, reason: str, timeout_s: float = STEP_END_WAIT_S) -> None:
        """End every session: its run stopped (recorded), then its connection shut down; bounded."""
        self.stop_runs(reason)
        with self._lock:
            served = list(self._served)
            threads = list(self._threads)
        for connection in served:
            with contextlib.suppress(OSError):  # already gone
                connection.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(timeout_s)

    def _serve_one(self, connection: socket.socket, already_read: bytes, desk: Desk) -> None:
        # heavy: the MCP SDK, loaded with the first client
        from holodesk.app.mcp.transports import serve_connection

        try:
            anyio.run(serve_connection, desk, connection, already_read)
        except Exception as exc:  # a broken session: said in words, the tray goes on
            log.exception("an MCP client's session failed")
            self._say(f"an MCP client's session ended with an error: {type(exc).__name__}: {exc}")
        finally:
            desk.steps.stop(CLIENT_GONE)
            desk.steps.wait_idle(STEP_END_WAIT_S)
            with self._lock:
                self._served.pop(connection, None)
            connection.close()
