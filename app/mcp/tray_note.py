"""Whether the tray app is running, to say so: `holodesk mcp` does not hand its steps to the tray (yet).

Asked as the tray asks for itself (app/gui/single_instance.py): a connection to its single-instance socket,
closed at once, no command sent.
"""

from __future__ import annotations

import socket
import sys

from holodesk.app.common.instance_client import InstanceError, server_address

TRAY_RUNNING = (
    "note: the Holodesk tray app is running too; holodesk mcp shows its own approval panel and does not hand"
    " steps to the tray, so two panels may ask at once: answer each where it shows"
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
