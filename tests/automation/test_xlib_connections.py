"""One process, two X servers whose extensions have other event codes: both connections open and work
once the process opted in (automation/xlib_connections.py; the test session does in tests/conftest.py)."""

from __future__ import annotations

import pytest
from Xlib import display as xdisplay

from holodesk.automation.virtual_display import start_xvfb
from holodesk.automation.xlib_connections import give_each_connection_its_own_tables

pytestmark = pytest.mark.display


def test_a_second_x_server_with_other_extension_codes_opens_after_the_first() -> None:
    give_each_connection_its_own_tables()  # done already for the session; said here for the reader
    # Leaving MIT-SHM out moves RANDR's event codes, as XWayland's differ from Xvfb's. Not XFIXES: without
    # it Xvfb aborts when a client disconnects (an assertion in its client clean-up), so the next close
    # found the server gone whenever the abort came first.
    fewer = start_xvfb(320, 200, extra_options=("-extension", "MIT-SHM"))
    full = start_xvfb(320, 200)
    connections = []
    try:
        for server in (fewer, full, fewer):
            connection = xdisplay.Display(server.display)
            connections.append(connection)
            assert connection.get_input_focus() is not None  # a round trip on each connection
        randr_codes = [c.query_extension("RANDR").first_event for c in connections]
        assert randr_codes[0] != randr_codes[1], "the two servers must give RANDR different event codes"
    finally:
        for connection in connections:
            connection.close()
        fewer.stop()
        full.stop()
