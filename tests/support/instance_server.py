"""A stand-in for the tray app in its own process: claims the single instance and prints what it receives.

Run as `python -m tests.support.instance_server` with HOLODESK_INSTANCE_NAME set. It prints one line
per event, flushed, so a test can follow it:
    listening <address>    it became the instance
    handed-over            another instance was running; it was told to "show" and this one exits 0
    received <command>     a command arrived ("stop" also ends the process)
    refused <words>        a message was not acted on (another protocol version, an unknown command)
    mcp-connected <n>      an "mcp" connection was handed over with n bytes of its stream already read;
                           this stand-in answers each of its lines with "echo: <line>" (the tray serves MCP)
"""

from __future__ import annotations

import os
import socket
import sys
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from holodesk.app.gui.qt import QtCore
from holodesk.app.gui.single_instance import acquire_instance


def on_mcp(connection: socket.socket, already_read: bytes) -> None:
    print(f"mcp-connected {len(already_read)}", flush=True)

    def echo() -> None:
        with connection, connection.makefile("rb") as rest:
            pending = already_read
            while True:
                if b"\n" not in pending:
                    more = rest.readline()
                    if not more:
                        return
                    pending += more
                    continue
                line, pending = pending.split(b"\n", 1)
                connection.sendall(b"echo: " + line + b"\n")

    threading.Thread(target=echo, daemon=True).start()


def main() -> int:
    app = QtCore.QCoreApplication(sys.argv)
    server = acquire_instance()
    if server is None:
        print("handed-over", flush=True)
        return 0

    def on_message(command: str) -> None:
        print(f"received {command}", flush=True)
        if command == "stop":
            server.close()
            app.quit()

    server.message_received.connect(on_message)
    server.refused.connect(lambda words: print(f"refused {words}", flush=True))
    server.mcp_connected.connect(on_mcp)
    print(f"listening {server.address}", flush=True)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
