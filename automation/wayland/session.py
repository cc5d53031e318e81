"""The one portal session of a run: started on first use, shared by capture and the input backend.

Starting it may show the desktop's permission dialog, so the user is told first what it asks
(`CONSENT_EXPLANATION`) through the `notify` callback, and clearly when they refused. The ScreenCast
restore token is kept in a file readable only by the user, so later runs skip the dialog where the
desktop allows it. Monitors come from the streams: geometry from the portal (logical pixels), scale
from the first frame's size against it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holodesk.automation.coords import Monitor, Rect
from holodesk.automation.errors import CaptureError
from holodesk.automation.wayland.newest_frame import first_frame_reopening_once
from holodesk.automation.wayland.portal import (
    SHARING_STOPPED,
    ConsentRefused,
    PortalError,
    PortalSession,
    PortalStream,
    probe_remote_desktop,
)
from holodesk.automation.wayland.stream import FrameStream

CONSENT_EXPLANATION = (
    "Holodesk needs your permission to see the screen and to use the pointer and keyboard. "
    "The desktop now shows a dialog (on GNOME: 'Remote Desktop' / 'Screen Share'): choose the screen "
    "to share and turn ON 'Allow Remote Interaction' - it is off by default, and without it Holodesk "
    "can see but cannot click or type. Holodesk still asks you before every step it takes; the "
    "permission ends when the run ends."
)
REMEMBERED = " The desktop remembers the choice, so later runs need not ask again."
ASKS_EVERY_RUN = (
    " This desktop's portal (RemoteDesktop version {version}) cannot remember the choice, so it asks at "
    "every run; version 2 (xdg-desktop-portal 1.17 and newer) can."
)
SHIFT_KEYSYM = 0xFFE1

CONSENT_REFUSED = (
    "You declined the desktop's screen-sharing request, so Holodesk cannot see or use this desktop. "
    "Start the task again and choose 'Share' to allow it."
)


class RestoreTokenStore:
    """The portal's ScreenCast restore token in one file, mode 0600 (its folder 0700)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self) -> str | None:
        try:
            token = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise CaptureError(f"cannot read the screen-sharing restore token {self.path}: {exc}") from exc
        return token or None

    def save(self, token: str) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path.with_name(self.path.name + ".tmp")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(descriptor, 0o600)  # a leftover .tmp keeps its own mode through O_CREAT: the token is private
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(token)
        os.replace(temporary, self.path)

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


@dataclass(frozen=True, slots=True)
class StreamMonitor:
    """A monitor of the Wayland desktop and the stream that shows it."""

    monitor: Monitor
    stream: PortalStream
    frames: FrameStream


class WaylandSession:
    """Opens the portal session and its frame streams on first use; `close` ends both."""

    def __init__(
        self,
        token_store: RestoreTokenStore | None = None,
        notify: Callable[[str], None] | None = None,
        *,
        consent_timeout_s: float = 300.0,
        first_frame_timeout_s: float = 12.0,
    ) -> None:
        self._token_store = token_store
        self._notify = notify
        self._consent_timeout_s = consent_timeout_s
        self._first_frame_timeout_s = first_frame_timeout_s
        self._lock = threading.Lock()
        self._portal: PortalSession | None = None
        self._monitors: tuple[StreamMonitor, ...] = ()
        self._pipewire_fd: int | None = None
        # time.monotonic() when the input backend's latest action began and when it ended (0.0: none yet)
        self.input_began_at = 0.0
        self.last_input_at = 0.0

    def started(self) -> tuple[PortalSession, tuple[StreamMonitor, ...]]:
        """The portal session and monitors, starting them now if this is the first use.

        CaptureError once the desktop has ended the session (the user stopped sharing, or the
        compositor did): its stream then just goes quiet, and its last frame must not be used.
        """
        with self._lock:
            if self._portal is None:
                self._start()
            assert self._portal is not None
            ended = self._ended_reason()
            if ended:
                raise CaptureError(ended)
            return self._portal, self._monitors

    def _ended_reason(self) -> str:
        assert self._portal is not None
        if self._portal.stopped_by_desktop():
            return SHARING_STOPPED
        for entry in self._monitors:
            problem = entry.frames.ended()
            if problem:
                return f"the screen-sharing stream stopped ({problem}): start the task again to share"
        return ""

    def note_input_began(self) -> None:
        """The input backend starts sending an action's input (a picture after this can show its effect)."""
        self.input_began_at = time.monotonic()

    def note_input(self) -> None:
        """The input backend sent input: the next grab waits briefly for a frame that can show its effect."""
        self.last_input_at = time.monotonic()

    @property
    def is_started(self) -> bool:
        return self._portal is not None

    def _start(self) -> None:
        token = self._token_store.load() if self._token_store else None
        if self._notify:
            try:
                version = probe_remote_desktop()
            except PortalError:
                version = 0  # PortalSession.open below says what is wrong
            if version < 2:
                self._notify(CONSENT_EXPLANATION + ASKS_EVERY_RUN.format(version=version or "unknown"))
            elif token is None:
                self._notify(CONSENT_EXPLANATION + REMEMBERED)
        try:
            portal = PortalSession.open(restore_token=token, consent_timeout_s=self._consent_timeout_s)
        except ConsentRefused as exc:
            if self._notify:
                self._notify(CONSENT_REFUSED)
            raise CaptureError(CONSENT_REFUSED) from exc
        except PortalError as exc:
            raise CaptureError(f"the desktop portal could not share the screen: {exc}") from exc
        monitors: list[StreamMonitor] = []
        try:
            if portal.restore_token and self._token_store:
                self._token_store.save(portal.restore_token)
            if (not portal.pointer_allowed or not portal.keyboard_allowed) and self._notify:
                self._notify(
                    "Screen sharing was allowed but remote interaction was not: Holodesk can see the "
                    "screen but cannot click or type. Turn on 'Allow Remote Interaction' next time."
                )
            if portal.keyboard_allowed:
                # Mutter makes the virtual keyboard on its first key: until then a headless seat has
                # no keyboard, and its keymap (which the input backend checks text against) cannot be read.
                portal.keyboard_keysym(SHIFT_KEYSYM, True)
                portal.keyboard_keysym(SHIFT_KEYSYM, False)
            fd = portal.open_pipewire_remote()
            self._pipewire_fd = fd
            for index, stream in enumerate(portal.streams, start=1):
                frames, pixels = first_frame_reopening_once(
                    functools.partial(FrameStream, fd, stream.node_id), self._first_frame_timeout_s
                )
                monitors.append(StreamMonitor(_monitor_for(index, stream, pixels.shape[1]), stream, frames))
        except BaseException:  # nothing half-built left open, Ctrl+C too; re-raised
            for built in monitors:
                built.frames.close()
            portal.close()
            self._close_fd()
            raise
        self._portal = portal
        self._monitors = tuple(monitors)

    def close(self) -> None:
        with self._lock:
            for monitor in self._monitors:
                monitor.frames.close()
            self._monitors = ()
            if self._portal is not None:
                self._portal.close()
                self._portal = None
            self._close_fd()

    def _close_fd(self) -> None:
        if self._pipewire_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipewire_fd)
            self._pipewire_fd = None


def _monitor_for(index: int, stream: PortalStream, frame_width: int) -> Monitor:
    """Physical-pixel geometry of a stream: its logical rectangle times the frame's scale."""
    logical_width, logical_height = stream.size
    scale = frame_width / logical_width if logical_width else 1.0
    left, top = stream.position
    rect = Rect(round(left * scale), round(top * scale), round(logical_width * scale), round(logical_height * scale))
    return Monitor(index=index, rect=rect, scale=scale, name=f"portal stream {stream.node_id}", is_primary=index == 1)
