"""Whether the tray app is running, to say so where `holodesk mcp` shows its own panel beside it.

Over stdio `holodesk mcp` hands its steps to a running tray app (app/mcp/tray_relay.py); over HTTP, or
with its own --sessions or --routines folder, it does not, and says so. Asked as the tray asks for itself
(app/gui/single_instance.py): a connection to its single-instance socket, closed at once, no command sent.
"""

from __future__ import annotations

import socket
import sys

from holodesk.app.common.instance_client import InstanceError, server_address

TRAY_RUNNING = (
    "note: the Holodesk tray app is running too; holodesk mcp --http shows its own approval panel and does"
    " not hand steps to the tray (only the stdio server does), so two panels may ask at once: answer each"
    " where it shows"
)
TRAY_KEEPS_ITS_FOLDERS = (
    "note: the Holodesk tray app is running, but it records in its own sessions and routines folders, and"
    " --sessions or --routines was given: this server shows its own approval panel beside the tray's"
    " (leave both options out to hand the steps to the tray)"
)
PROBE_TIMEOUT_S = 0.5


def tray_is_running() -> bool:
    if sys.platform == "win32":  # pragma: no cover - a named pipe; not asked there
        return False
    try:
        address = server_address()
    except InstanceError:  # the runtime folder cannot be made or trusted: no tray listens there either
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(PROBE_TIMEOUT_S)
        try:
            probe.connect(address)
        except OSError:
            return False
    return True
