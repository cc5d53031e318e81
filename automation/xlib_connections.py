"""Every python-xlib connection gets its own extension tables, so one process can talk to two X servers.

python-xlib 0.33 keeps the table of extension events and the extension opcodes on the connection
class, shared by every connection of the process. Each connection adds its server's extension event
codes there, so a second X server whose extensions have other codes (XWayland's differ from Xvfb's;
so do two Xvfb started with different extensions) finds another server's event at a code where it
adds a sub-event, and opening the connection fails with "'type' object does not support item
assignment" (pyautogui's import included).

Holodesk's own processes talk to one X server each (the session's, or XWayland's), so they leave
python-xlib as it is. A process that talks to several, such as the test session (Xvfb servers and
XWayland) or `python -m bench`, opts in by calling `give_each_connection_its_own_tables` once,
before it opens its first connection: from then on every connection of that process, pyautogui's
and pynput's included, starts from the core tables only.
"""

from __future__ import annotations

from typing import Any

_installed = False


def give_each_connection_its_own_tables() -> None:
    """Install, once, a connection initialiser that starts each connection from the core tables only."""
    global _installed
    if _installed:
        return
    try:
        from Xlib.protocol import display as protocol_display
        from Xlib.protocol import event
    except ImportError:  # no python-xlib (not Linux): nothing to fix
        return
    shared_init = protocol_display.Display.__init__

    def own_tables_init(self: Any, *args: Any, **kwargs: Any) -> None:
        # Instance attributes shadow the class's shared ones before the server's extensions are added.
        self.event_classes = event.event_class.copy()
        self.extension_major_opcodes = {}
        shared_init(self, *args, **kwargs)

    protocol_display.Display.__init__ = own_tables_init
    _installed = True
