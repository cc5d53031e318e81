"""One Holodesk per user and display: the running instance listens on a local socket for "prompt", "show" and "stop".

The tray app calls `acquire_instance()` at start-up. It either becomes the instance (and gets an
`InstanceServer` whose `message_received` signal carries each command) or finds one already running,
tells it to "show" itself and returns None, so the second start exits instead of opening a second
tray icon on that display (another display has another socket, see `instance_client.display_key`).
`holodesk trigger` talks to the same socket through `holodesk.app.common.instance_client`, which is where
the address is defined; the versioned lines are `holodesk.app.common.instance_protocol`'s. A message of
another protocol version (another install's `holodesk`) is answered with an error, emitted on `refused`
in words for the tray app to show, and not acted on.

The "mcp" command is answered and then handed over whole: the connection leaves Qt as a plain blocking
socket (a duplicate of its descriptor, with any bytes Qt had already read) on `mcp_connected`, and the
tray app serves MCP on it (app/mcp/tray_clients.py). The socket's access is the instance's: this user only.

Who the instance is, is decided by a lock file next to the socket (QLockFile, released by a crash
because its owner's PID is gone). A crashed instance also leaves its socket file behind: once the new
instance holds the lock and finds that nobody answers on that socket, it removes it with
QLocalServer.removeServer and listens.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from holodesk.app.common.instance_client import (
    InstanceError,
    NoInstanceError,
    instance_name,
    runtime_dir,
    send_to_running_instance,
    server_address,
)
from holodesk.app.common.instance_protocol import (
    COMMANDS,
    MAX_REQUEST_BYTES,
    MCP_COMMAND,
    Refusal,
    decode_request,
    encode_answer,
)
from holodesk.app.gui.qt import QtCore, QtNetwork, Signal

# A client that connects and sends nothing is dropped after this long, so it cannot pile up.
IDLE_CLIENT_TIMEOUT_MS = 2000
# How long listen() waits for an existing socket to accept before calling it stale.
PROBE_TIMEOUT_MS = 500
# How long a second start keeps asking the lock holder to show itself while it finishes starting.
HANDOVER_TIMEOUT_S = 3.0
# How long the "mcp" answer may take to leave before the connection is handed over anyway.
ANSWER_WRITE_TIMEOUT_MS = 1000


class InstanceServer(QtCore.QObject):
    """The running instance's end of the socket: answers each command line and emits it.

    `message_received` carries a command to act on; `refused` carries, in words, why a message was not
    acted on (another install's protocol version, an unknown command); `mcp_connected` carries an MCP
    client's connection (a blocking socket.socket) and the bytes of its stream already read.
    """

    message_received = Signal(str)
    refused = Signal(str)
    mcp_connected = Signal(object, bytes)

    def __init__(self, name: str | None = None, parent: QtCore.QObject | None = None) -> None:
        super().__init__(parent)
        self.address = server_address(name)
        self._server = QtNetwork.QLocalServer(self)
        # Only this user may connect: another account must not be able to drive the agent.
        self._server.setSocketOptions(QtNetwork.QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._accept_connections)
        self._lock_path = lock_path(self.address)
        self._lock = QtCore.QLockFile(self._lock_path)
        # Held for the instance's whole life: only a dead owner makes it stale, never its age.
        self._lock.setStaleLockTime(0)

    def listen(self) -> bool:
        """Become the instance and start listening. False when another instance is already running.

        The lock file decides who the instance is (Qt's QLockFile sees through a lock left by a dead
        process), because QLocalServer alone cannot: with UserAccessOption it replaces an existing
        socket file instead of failing. Once the lock is ours, a socket file that nobody answers on
        is a crashed instance's leftover: it is removed and listening starts.
        """
        if not self._lock.tryLock(0):
            if self._lock.error() == QtCore.QLockFile.LockError.LockFailedError:
                return False
            raise InstanceError(f"cannot create the instance lock {self._lock_path}: check that folder's permissions")
        if _someone_listens(self.address):
            # Someone deleted the lock file under a running instance; it still owns the socket.
            self._lock.unlock()
            return False
        QtNetwork.QLocalServer.removeServer(self.address)
        if not self._server.listen(self.address):
            self._lock.unlock()
            raise InstanceError(f"cannot listen on {self.address}: {self._server.errorString()}")
        return True

    def is_listening(self) -> bool:
        return self._server.isListening()

    def close(self) -> None:
        """Stop listening and release the lock; Qt removes the socket file."""
        self._server.close()
        self._lock.unlock()

    def _accept_connections(self) -> None:
        while self._server.hasPendingConnections():
            connection = self._server.nextPendingConnection()
            connection.readyRead.connect(lambda connection=connection: self._read_command(connection))
            connection.disconnected.connect(connection.deleteLater)
            # The timer belongs to the connection: it dies with it when the client behaves.
            QtCore.QTimer.singleShot(IDLE_CLIENT_TIMEOUT_MS, connection, connection.abort)
            # The command may have arrived before readyRead was connected.
            if connection.bytesAvailable():
                self._read_command(connection)

    def _read_command(self, connection: QtNetwork.QLocalSocket) -> None:
        if not connection.canReadLine():
            if connection.bytesAvailable() > MAX_REQUEST_BYTES:
                self._answer(connection, encode_answer(error="line too long"))
                self.refused.emit(
                    f"A message longer than {MAX_REQUEST_BYTES} bytes reached the instance socket; nothing was done."
                )
            return
        line = bytes(connection.readLine(MAX_REQUEST_BYTES + 1).data()).decode("utf-8", errors="replace").strip()
        request = decode_request(line)
        # Each signal is emitted after the answer is on its way: a slot that opens a window must not
        # make the client time out.
        if isinstance(request, Refusal):
            self._answer(connection, request.answer)
            self.refused.emit(request.words)
            return
        if request.command == MCP_COMMAND:
            self._hand_over(connection)
            return
        self._answer(connection, encode_answer())
        self.message_received.emit(request.command)

    def _hand_over(self, connection: QtNetwork.QLocalSocket) -> None:
        """Answer ok, then give the connection to `mcp_connected` as a plain socket and drop Qt's hold on it."""
        if sys.platform == "win32":  # pragma: no cover - a named pipe has no socket descriptor to hand over
            self._answer(connection, encode_answer(error="MCP through the tray app is not available on Windows"))
            return
        connection.write(f"{encode_answer()}\n".encode())
        while connection.bytesToWrite() and connection.waitForBytesWritten(ANSWER_WRITE_TIMEOUT_MS):
            pass
        already_read = bytes(connection.readAll().data())
        # The duplicate keeps the connection open when Qt closes its own descriptor; it shares the
        # non-blocking flag Qt set, which the MCP side's blocking reads must not have.
        handed = socket.socket(fileno=os.dup(int(connection.socketDescriptor())))
        handed.setblocking(True)
        connection.abort()
        self.mcp_connected.emit(handed, already_read)

    def _answer(self, connection: QtNetwork.QLocalSocket, answer: str) -> None:
        connection.write(f"{answer}\n".encode())
        connection.flush()
        connection.disconnectFromServer()


def lock_path(address: str) -> str:
    """The lock file beside the socket (Unix), or in the runtime folder for a Windows pipe name."""
    if os.path.isabs(address):
        return f"{address}.lock"
    return str(runtime_dir() / f"{address}.lock")


def _someone_listens(address: str) -> bool:
    probe = QtNetwork.QLocalSocket()
    probe.connectToServer(address)
    connected = probe.waitForConnected(PROBE_TIMEOUT_MS)
    probe.abort()
    return connected


def acquire_instance(name: str | None = None, parent: QtCore.QObject | None = None) -> InstanceServer | None:
    """Become the running instance, or tell the one already running to show itself and return None.

    Raises InstanceError when neither works (the socket cannot be created, the other instance hangs).
    """
    server = InstanceServer(name, parent)
    if server.listen():
        return server
    server.deleteLater()
    # The other instance may hold the lock but be a moment away from listening: retry briefly.
    deadline = time.monotonic() + HANDOVER_TIMEOUT_S
    while True:
        try:
            send_to_running_instance("show", name=name)
            return None
        except NoInstanceError:
            if time.monotonic() > deadline:
                raise NoInstanceError(
                    f"another Holodesk holds {lock_path(server.address)} but does not answer on {server.address};"
                    " if it hangs, end it and start `holodesk` again"
                ) from None
            time.sleep(0.1)


__all__ = [
    "COMMANDS",
    "InstanceError",
    "InstanceServer",
    "NoInstanceError",
    "acquire_instance",
    "instance_name",
    "send_to_running_instance",
    "server_address",
]
