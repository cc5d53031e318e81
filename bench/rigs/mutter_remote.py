"""The test's own hands and eyes on a headless mutter, through mutter's private remote-desktop API.

The portal's permission dialog must be answered by the test, never by the product: this talks to
`org.gnome.Mutter.RemoteDesktop` / `org.gnome.Mutter.ScreenCast` directly (what the portal backend
itself uses; it asks no permission), records the primary monitor and clicks / types with mutter's
own virtual devices. Frames come through the same GStreamer reader the product uses, fed a socket
connected to the PipeWire daemon.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from typing import Any

import numpy as np
from jeepney import DBusAddress, MatchRule, MessageType, Properties, message_bus, new_method_call
from jeepney.io.blocking import DBusConnection, open_dbus_connection

from holodesk.automation.wayland.stream import FrameStream

MUTTER_BUS = "org.gnome.Mutter.RemoteDesktop"
SCREEN_CAST_BUS = "org.gnome.Mutter.ScreenCast"
BTN_LEFT = 0x110


class MutterRemote:
    """A mutter remote-desktop session with one recorded monitor."""

    def __init__(self, bus_address: str, runtime_dir: str, timeout_s: float = 10.0) -> None:
        self._timeout_s = timeout_s
        self._bus: DBusConnection = open_dbus_connection(bus_address)
        rd = DBusAddress("/org/gnome/Mutter/RemoteDesktop", bus_name=MUTTER_BUS, interface=MUTTER_BUS)
        self._session_path = self._call(rd, "CreateSession", "", ())[0]
        self._session = DBusAddress(self._session_path, bus_name=MUTTER_BUS, interface=MUTTER_BUS + ".Session")
        session_id = self._get(self._session, "SessionId")
        sc = DBusAddress("/org/gnome/Mutter/ScreenCast", bus_name=SCREEN_CAST_BUS, interface=SCREEN_CAST_BUS)
        cast_path = self._call(sc, "CreateSession", "a{sv}", ({"remote-desktop-session-id": ("s", session_id)},))[0]
        cast = DBusAddress(cast_path, bus_name=SCREEN_CAST_BUS, interface=SCREEN_CAST_BUS + ".Session")
        self.stream_path = self._call(cast, "RecordMonitor", "sa{sv}", ("", {"cursor-mode": ("u", 1)}))[0]
        rule = MatchRule(
            type="signal", interface=SCREEN_CAST_BUS + ".Stream", member="PipeWireStreamAdded", path=self.stream_path
        )
        self._bus.send_and_get_reply(message_bus.AddMatch(rule), timeout=timeout_s)
        with self._bus.filter(rule) as added:
            self._call(self._session, "Start", "", ())
            node_id = int(self._bus.recv_until_filtered(added, timeout=timeout_s).body[0])
        pipewire = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        pipewire.connect(os.path.join(runtime_dir, "pipewire-0"))
        self._pipewire = pipewire
        self.frames = FrameStream(pipewire.fileno(), node_id)

    def _call(self, address: Any, method: str, signature: str, body: tuple[Any, ...]) -> Any:
        message = new_method_call(address, method, signature, body)
        reply = self._bus.send_and_get_reply(message, timeout=self._timeout_s)
        if reply.header.message_type == MessageType.error:
            raise RuntimeError(f"mutter {method} failed: {reply.body}")
        return reply.body

    def _get(self, address: DBusAddress, name: str) -> Any:
        reply = self._bus.send_and_get_reply(Properties(address).get(name), timeout=self._timeout_s)
        return reply.body[0][1]

    def screenshot(self, timeout_s: float = 5.0) -> np.ndarray:
        """The newest frame, HxWx4 BGRx."""
        return self.frames.latest(timeout_s)[0]

    def move(self, x: float, y: float) -> None:
        self._call(self._session, "NotifyPointerMotionAbsolute", "sdd", (self.stream_path, float(x), float(y)))

    def click(self, x: float, y: float) -> None:
        self.move(x, y)
        time.sleep(0.15)  # let the toolkit see the pointer enter before the press
        self._call(self._session, "NotifyPointerButton", "ib", (BTN_LEFT, True))
        time.sleep(0.05)  # GTK 4's switch ignores a press and release in the same instant
        self._call(self._session, "NotifyPointerButton", "ib", (BTN_LEFT, False))

    def key(self, keysym: int) -> None:
        self._call(self._session, "NotifyKeyboardKeysym", "ub", (keysym, True))
        self._call(self._session, "NotifyKeyboardKeysym", "ub", (keysym, False))

    def close(self) -> None:
        self.frames.close()
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self._call(self._session, "Stop", "", ())
        self._pipewire.close()
        self._bus.close()
