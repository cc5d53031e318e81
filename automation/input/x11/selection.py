"""Holodesk's own owner of the X selections, so that a paste pastes the offered text and nothing else.

A paste on X11 is a conversation (ICCCM section 2): the owner of a selection (CLIPBOARD for ctrl+v,
PRIMARY for xterm's shift+insert) is asked for its content by the pasting program, which sends a
SelectionRequest naming one of its own windows (the requestor). Owning the selection ourselves lets
us know what a clipboard tool cannot tell: that we really own it (GetSelectionOwner names our
window), and which program asked for the text and when. `SelectionOffer` claims the selections from
a hidden window on its own display connection with a real server timestamp, confirms ownership,
and serves every request on a thread; `paste_with_own_selection` offers a text, presses the paste
key, waits (bounded) until the focused window's program asked for the text and then asked nothing
more for a moment (a program may read it twice for one paste), and only then puts the user's
previous text back. A window's program is known by its resource ID: the X server gives
every client the same resource-ID mask, and the bits outside it name the client, so the requestor
window and the focused window belong to the same X client exactly when those bits agree. A program
may ask from a second connection of its own: alacritty's clipboard opens one, so its request came
from another client than its window's, and a paste that arrived whole was reported not taken. So a
requestor also counts as the focused window's program when the X server's X-Resource extension
names the same local process ID for both clients (Xorg and Xvfb have it; a remote client has no
process ID there, and then only the client bits decide).

On XWayland (`SelectionHost.XWAYLAND`) a native Wayland program never asks itself: the compositor
bridges the X CLIPBOARD to Wayland, and its own X client converts the selection on the program's
behalf. Measured with GNOME's mutter and a Qt field: on every change of owner mutter asks for
TARGETS and at once for the text (it keeps a copy, and takes the clipboard over with it when the
owner's connection ends; an owner that gives the selection up leaves it empty, which is why ours
does), and a paste with ctrl+v is one more request for the text, from mutter's client again; a key
that pastes nothing asks nothing. With the key sent right after the claim, mutter's copy came after
the key, where it looks exactly like a paste (and a Wayland program cannot see our offer before
mutter noted it). So there the paste key waits until the compositor asked for the targets (and, where
it keeps a copy as mutter does, for the text: `compositor_copies`) and then asked nothing for a
moment, and any program's request for the text after the key counts (an XWayland program such as
xterm asks itself, which counts too). Waiting for a quiet moment after the targets alone was not
enough on a loaded machine: mutter's copy came more than the quiet moment after its targets, after the
key, and GTK pasted the previous (empty) clipboard (once in a fresh run of the GNOME tier). Only
CLIPBOARD is offered there: ctrl+v pastes it.

An owner that does not hand over the previous content within OWNER_TIMEOUT_S fails the paste before
anything is claimed, naming the program. Its late answer still finds our window: the connection stays
open for it a while, because an answer to a window that is gone ends xclip, and with it the user's text.
An owner that exits or loses the selection while asked never answers, so the wait looks at the owner
as it goes and asks the new one; each request has a property of its own, so the old owner's late
answer cannot pass for the new one's.

Served targets: TARGETS, TIMESTAMP, UTF8_STRING, text/plain;charset=utf-8, TEXT, and STRING (ISO
Latin-1, so only for a text that has no other character). MULTIPLE and INCR are not offered: a
text larger than one X request can carry is refused before approval (`check_offer_size`, called
by the backends' checks) and again before anything is claimed.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from holodesk.automation.clipboard import XCLIP, XCLIP_PRIMARY, CommandClipboard
from holodesk.automation.errors import ClipboardError

# Bound for the X server's own round trips (a server time, the claim).
REPLY_TIMEOUT_S = 3.0
# Bound for the selection's owner, a program that may be busy, to hand over the previous content: Qt's
# X11 clipboard waits 5 s for an owner too. 3 s failed once on a loaded XWayland desktop.
OWNER_TIMEOUT_S = 5.0
# How long the connection of an offer whose owner did not answer stays open for the late answer: an
# owner answering a window that is gone gets BadWindow, which ends xclip (and with it the user's text).
LATE_ANSWER_S = 60.0
# While waiting for the owner, how often to look whether it still owns the selection, and how many
# successive owners to ask before giving up.
OWNER_CHECK_S = 0.25
OWNER_CHANGES = 3
# How long the thread may take to end once asked to.
STOP_TIMEOUT_S = 2.0

SELECTIONS = ("CLIPBOARD", "PRIMARY")
# After the paste key, how long nothing must have asked before the previous text goes back where the
# compositor keeps its own copy (mutter): the Wayland program's read is not seen from here.
COPYING_COMPOSITOR_QUIET_S = 1.0
# Targets that carry the text itself, in the order the previous content is read.
TEXT_TARGETS = ("UTF8_STRING", "text/plain;charset=utf-8", "TEXT", "STRING")
_PROPERTY = "HOLODESK_SELECTION"
# Header bytes of a ChangeProperty request, before its data.
_CHANGE_PROPERTY_HEADER = 24
# The X protocol's CurrentTime, which ICCCM forbids owners to claim with.
_CURRENT_TIME = 0


class SelectionError(ClipboardError):
    """Holodesk's own selection could not do what a paste needs; the message says what did not happen."""


class OwnerSilent(SelectionError):
    """The selection's owner did not hand over its content in time, so nothing was offered."""


class _OwnerChanged(Exception):
    """The selection changed owner while its content was asked for; `owner` is the new one's window (0: none)."""

    def __init__(self, owner: int) -> None:
        super().__init__("the selection changed owner")
        self.owner = owner


class PasteNotTaken(SelectionError):
    """The paste key was pressed and no program asked for the text in time: the key went to the focus as a key."""


class SelectionHost(Enum):
    """The X server the selections live on: it decides whose request is the paste (module docstring)."""

    # A plain X server: the focused window's program asks for the text itself.
    X_SERVER = "X server"
    # XWayland under a compositor that bridges its CLIPBOARD: the compositor's own client asks for a
    # Wayland program, and notes every new owner (TARGETS, mutter also a copy) before a paste can work.
    XWAYLAND = "XWayland"


def largest_offer_bytes(display_name: str | None = None) -> int:
    """The most bytes one ChangeProperty request carries on that display: the largest text Holodesk offers."""
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError) as exc:
        raise SelectionError(f"cannot open the X display to offer the text: {exc}") from exc
    try:
        return _offer_limit(display)
    finally:
        display.close()


def _offer_limit(display: Any) -> int:
    return int(display.display.info.max_request_length) * 4 - _CHANGE_PROPERTY_HEADER


def _oversized(text: str, limit: int) -> str | None:
    """Why `text` cannot be offered in one request of at most `limit` bytes, or None when it can."""
    size = len(text.encode("utf-8"))
    if size <= limit:
        return None
    return (
        f"the text to paste is {size} bytes in UTF-8, more than one X request carries here ({limit} bytes), "
        "and Holodesk does not hand a text over in parts"
    )


def check_offer_size(text: str, display_name: str | None = None) -> None:
    """SelectionError, in words, when `text` is too large to offer on that display; sends nothing."""
    problem = _oversized(text, largest_offer_bytes(display_name))
    if problem is not None:
        raise SelectionError(f"{problem}: type or paste a shorter text")


@dataclass(frozen=True, slots=True)
class SelectionRequest:
    """One request a program sent to our window, and whether it got the text."""

    selection: str
    target: str
    requestor: int  # the asking program's window
    got_text: bool  # it was answered with the text (not a list of targets, not a refusal)
    after_paste_key: bool  # it came after `paste_key_pressed()`
    requestor_pid: int | None = None  # the asking client's process ID (X-Resource), None when unknown


@dataclass(frozen=True, slots=True)
class PreviousContent:
    """What a selection held before the offer: text, no owner, or an owner offering no text we can keep."""

    selection: str
    owned: bool
    text: str | None

    def describe(self) -> str:
        if not self.owned:
            return f"{self.selection} had no owner"
        if self.text is None:
            return f"{self.selection} held no text Holodesk can keep (an image or files?)"
        return f"{self.selection} held a text of {len(self.text)} characters"


@dataclass(slots=True)
class _State:
    """What the serving thread shares with callers, under `SelectionOffer._changed`."""

    requests: list[SelectionRequest] = field(default_factory=list)
    lost_to: dict[str, int] = field(default_factory=dict)  # selection -> the new owner's window (0: none)
    paste_key_pressed: bool = False
    failure: str | None = None
    stopped: bool = False
    last_request_at: float = 0.0  # time.monotonic() of the latest request


def _close_after_late_answer(display: Any) -> None:
    """Close `display` once the owner answered the pending conversion, or after LATE_ANSWER_S, on a thread."""

    def wait_then_close() -> None:
        from Xlib import X

        deadline = time.monotonic() + LATE_ANSWER_S
        try:
            while (left := deadline - time.monotonic()) > 0:
                if not display.pending_events():
                    select.select([display.fileno()], [], [], left)
                    continue
                if display.next_event().type == X.SelectionNotify:
                    break
        finally:
            display.close()

    threading.Thread(target=wait_then_close, name="holodesk-selection-late-answer", daemon=True).start()


def _owner_window(display: Any, selection_atom: int) -> int:
    """The window owning the selection `selection_atom` on `display`, 0 when none does."""
    from Xlib import X

    owner = display.get_selection_owner(selection_atom)
    return 0 if owner == X.NONE else int(owner.id)


def client_of(window: int, resource_mask: int) -> int:
    """The client part of a resource ID: equal for all windows of one X client."""
    return window & ~resource_mask


def client_pid(display: Any, window: int) -> int | None:
    """The process ID of the X client that created `window` (X-Resource's QueryClientIds), or None
    when the server lacks the extension or does not know it (a remote client)."""
    from Xlib import error as xerror
    from Xlib.ext import res

    if not display.has_extension(res.extname):
        return None
    try:
        reply = display.res_query_client_ids([{"client": window, "mask": res.LocalClientPIDMask}])
    except xerror.XError:
        return None
    for entry in reply.ids:
        if entry.spec.mask & res.LocalClientPIDMask and entry.value:
            return int(entry.value[0])
    return None


def program_words(pid: int | None, window: int) -> str:
    """The X client that created `window`, in words: "xclip, process 1234"; its window when its process
    is unknown or has ended (xclip forks: the process that opened the connection exits, its child serves)."""
    if pid is None:
        return f"window {window:#x}"
    try:
        name = Path(f"/proc/{pid}/comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return f"window {window:#x}; its X connection was opened by process {pid}, which has ended"
    return f"{''.join(c for c in name if c.isprintable())}, process {pid}"


def window_pid(window: int, display_name: str | None = None) -> int | None:
    """`client_pid` on a connection of its own (None also when the display cannot be opened)."""
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError):
        return None
    try:
        return client_pid(display, window)
    finally:
        display.close()


class SelectionOffer:
    """`text` offered on `selections` by a hidden window of our own, served on a thread until `close()`.

    `start()` reads what the selections held, claims them and confirms the claim; `claim_time` is
    the X time of the event that led to the claim (ICCCM), by default a fresh server time.
    """

    def __init__(
        self,
        text: str,
        selections: Sequence[str] = SELECTIONS,
        *,
        display_name: str | None = None,
        claim_time: int | None = None,
    ) -> None:
        if not selections:
            raise ValueError("offer at least one selection")
        self.text = text
        self.selections = tuple(selections)
        self.display_name = display_name
        self._claim_time = claim_time
        self._encoded = text.encode("utf-8")
        try:
            self._latin1: bytes | None = text.encode("latin-1")
        except UnicodeEncodeError:
            self._latin1 = None
        self.previous: dict[str, PreviousContent] = {}
        self.window_id = 0
        self.resource_mask = 0
        self._display: Any = None
        self._window: Any = None
        self._atoms: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._acquired = 0
        self._changed = threading.Condition()
        self._state = _State()
        self._thread: threading.Thread | None = None
        self._wake_read, self._wake_write = -1, -1
        self._target_pid: int | None = None  # the focused window's process, once `wait_until_taken` asked
        self._requests_sent = 0  # conversions of the previous content asked for
        # The window whose answer `start()` waits for (the previous content's owner), 0 when none.
        self.waiting_for_owner = 0

    # -- set-up, in the caller's thread: nothing is served yet ------------------------------------

    def start(self) -> None:
        """Read the previous content, claim every selection, confirm the claim, start serving."""
        from Xlib import X
        from Xlib import display as xdisplay
        from Xlib import error as xerror

        try:
            self._display = xdisplay.Display(self.display_name)
        except (xerror.DisplayError, OSError, KeyError) as exc:
            raise SelectionError(f"cannot open the X display to offer the text: {exc}; nothing was pasted") from exc
        try:
            too_large = _oversized(self.text, _offer_limit(self._display))
            if too_large is not None:
                raise SelectionError(f"{too_large}: nothing was pasted")
            self.resource_mask = int(self._display.display.info.resource_id_mask)
            root = self._display.screen().root
            self._window = root.create_window(
                -10, -10, 1, 1, 0, X.CopyFromParent, X.InputOnly, X.CopyFromParent, event_mask=X.PropertyChangeMask
            )
            self.window_id = int(self._window.id)
            self._window.set_wm_name("Holodesk paste")
            for name in (*self.selections, *TEXT_TARGETS, "TARGETS", "TIMESTAMP", "INTEGER"):
                self._atom(name)
            self._atom(_PROPERTY)
            now = self._server_time()
            for selection in self.selections:
                self.previous[selection] = self._read_previous(selection, now)
            self._acquired = self._claim_time if self._claim_time is not None else self._server_time()
            for selection in self.selections:
                self._window.set_selection_owner(self._atoms[selection], self._acquired)
            self._confirm_ownership()
        except OwnerSilent:
            _close_after_late_answer(self._display)
            raise
        except SelectionError:
            self._display.close()
            raise
        except (xerror.XError, OSError) as exc:
            self._display.close()
            raise SelectionError(f"offering the text on the X selections failed: {exc}; nothing was pasted") from exc
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._serve, name="holodesk-selection", daemon=True)
        self._thread.start()

    def _atom(self, name: str) -> int:
        atom = self._atoms.get(name)
        if atom is None:
            atom = int(self._display.intern_atom(name))
            self._atoms[name] = atom
            self._names[atom] = name
        return atom

    def _name(self, atom: int) -> str:
        name = self._names.get(atom)
        if name is None:
            name = str(self._display.get_atom_name(atom))
            self._names[atom] = name
        return name

    def _next_event(self, deadline: float) -> Any:
        """The next event, or None once `deadline` passed."""
        while not self._display.pending_events():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            select.select([self._display.fileno()], [], [], left)
        return self._display.next_event()

    def _server_time(self) -> int:
        """A real X server time: that of the PropertyNotify an empty append to our window causes."""
        from Xlib import X, Xatom

        self._window.change_property(self._atoms[_PROPERTY], Xatom.STRING, 8, b"", mode=X.PropModeAppend)
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while (event := self._next_event(deadline)) is not None:
            if event.type == X.PropertyNotify and event.window.id == self.window_id:
                return int(event.time)
        raise SelectionError(
            f"the X server did not report a time within {REPLY_TIMEOUT_S:g} s, so no selection could be "
            "claimed: nothing was pasted"
        )

    def _read_previous(self, selection: str, now: int) -> PreviousContent:
        """The selection's text before the offer, converted to our own window (bounded). An owner that
        gives the selection up while asked (it exited, or lost it) never answers: its successor is asked."""
        owner = _owner_window(self._display, self._atoms[selection])
        for _ in range(OWNER_CHANGES):
            if not owner:
                return PreviousContent(selection, owned=False, text=None)
            try:
                for target in ("UTF8_STRING", "STRING"):
                    text = self._convert(selection, target, now, owner)
                    if text is not None:
                        return PreviousContent(selection, owned=True, text=text)
                return PreviousContent(selection, owned=True, text=None)
            except _OwnerChanged as changed:
                owner = changed.owner
        raise SelectionError(
            f"{selection} changed owner {OWNER_CHANGES} times while its content was read, so it could not be "
            "kept for afterwards: nothing was pasted"
        )

    def _convert(self, selection: str, target: str, now: int, owner: int) -> str | None:
        from Xlib import X

        # A property of its own per request: a late answer to an earlier one cannot pass for this one.
        self._requests_sent += 1
        into = self._atom(f"{_PROPERTY}_{self._requests_sent}")
        self._window.convert_selection(self._atoms[selection], self._atoms[target], into, now)
        self._display.flush()
        self.waiting_for_owner = owner
        deadline = time.monotonic() + OWNER_TIMEOUT_S
        try:
            event = self._answer_from(owner, selection, target, into, deadline)
        finally:
            self.waiting_for_owner = 0
        if event.property == X.NONE:
            return None
        value = self._window.get_full_property(into, X.AnyPropertyType)
        self._window.delete_property(into)
        if value is None or value.format != 8 or self._name(value.property_type) == "INCR":
            return None  # INCR: larger than one request; Holodesk does not keep it
        data = bytes(value.value) if not isinstance(value.value, str) else value.value.encode("latin-1")
        return data.decode("latin-1" if target == "STRING" else "utf-8", "replace")

    def _answer_from(self, owner: int, selection: str, target: str, into: int, deadline: float) -> Any:
        """The owner's SelectionNotify for the request into `into`; _OwnerChanged or OwnerSilent."""
        from Xlib import X

        while True:
            event = self._next_event(min(deadline, time.monotonic() + OWNER_CHECK_S))
            if event is None:
                current = _owner_window(self._display, self._atoms[selection])
                if current != owner:
                    raise _OwnerChanged(current)
                if time.monotonic() >= deadline:
                    raise OwnerSilent(
                        f"the program owning {selection} ({program_words(client_pid(self._display, owner), owner)}) "
                        f"did not answer within {OWNER_TIMEOUT_S:g} s, so its content could not be kept for "
                        "afterwards: nothing was pasted"
                    )
            elif (
                event.type == X.SelectionNotify
                and event.selection == self._atoms[selection]
                and (event.property == into or (event.property == X.NONE and event.target == self._atoms[target]))
            ):
                return event

    def _confirm_ownership(self) -> None:
        for selection in self.selections:
            owner_id = _owner_window(self._display, self._atoms[selection])
            if owner_id != self.window_id:
                held_by = f"window {owner_id:#x} still owns it" if owner_id else "it has no owner"
                raise SelectionError(
                    f"Holodesk could not take over the {selection} selection ({held_by}): nothing was pasted"
                )

    # -- serving, on the thread -------------------------------------------------------------------

    def _serve(self) -> None:
        from Xlib import X
        from Xlib import error as xerror

        try:
            while True:
                with self._changed:
                    if self._state.stopped:
                        return
                while self._display.pending_events():
                    event = self._display.next_event()
                    if event.type == X.SelectionRequest:
                        self._answer(event)
                    elif event.type == X.SelectionClear:
                        self._lost(event)
                readable, _, _ = select.select([self._display.fileno(), self._wake_read], [], [])
                if self._wake_read in readable:
                    os.read(self._wake_read, 64)
        except (xerror.XError, OSError, xerror.ConnectionClosedError) as exc:
            with self._changed:
                self._state.failure = f"the connection serving the text failed: {exc}"
                self._changed.notify_all()
        finally:
            self._give_up()
            self._display.close()

    def _give_up(self) -> None:
        """Give up the selections nobody took from us, with our claim's time (ICCCM 2.1).

        That time, not CurrentTime: a program that claimed one meanwhile (xclip restoring the
        previous text) did so later, and the server then ignores this request.
        """
        from Xlib import X
        from Xlib import error as xerror
        from Xlib.protocol import request

        with self._changed:
            kept = [selection for selection in self.selections if selection not in self._state.lost_to]
        try:
            for selection in kept:
                request.SetSelectionOwner(
                    display=self._display.display, window=X.NONE, selection=self._atoms[selection], time=self._acquired
                )
            self._display.sync()
        except (xerror.XError, OSError, xerror.ConnectionClosedError):
            pass  # the connection is gone: the server dropped our ownership with it

    def _answer(self, event: Any) -> None:
        """Convert the text to the requested target on the requestor's property, then notify it (ICCCM 2.2)."""
        from Xlib import X, Xatom
        from Xlib import error as xerror
        from Xlib.protocol import event as xevent

        selection = self._name(event.selection)
        target = self._name(event.target)
        # Obsolete clients name no property; ICCCM says to use the target atom then.
        prop = event.property if event.property != X.NONE else event.target
        with self._changed:
            ours = selection in self.selections and selection not in self._state.lost_to
            after_key = self._state.paste_key_pressed
        # A request from before our claim is for the previous owner (ICCCM 2.2).
        early = event.time != _CURRENT_TIME and event.time < self._acquired
        payload = None if not ours or early else self._payload(target)
        catcher = xerror.CatchError()
        if payload is not None:
            type_name, fmt, data = payload
            type_atom = Xatom.ATOM if type_name == "ATOM" else self._atom(type_name)
            event.requestor.change_property(prop, type_atom, fmt, data, onerror=catcher)
        notify = xevent.SelectionNotify(
            time=event.time,
            requestor=event.requestor,
            selection=event.selection,
            target=event.target,
            property=prop if payload is not None else X.NONE,
        )
        event.requestor.send_event(notify, onerror=catcher)
        self._display.sync()
        got_text = payload is not None and catcher.get_error() is None and target not in ("TARGETS", "TIMESTAMP")
        requestor = int(event.requestor.id)
        pid = client_pid(self._display, requestor) if after_key else None
        request = SelectionRequest(selection, target, requestor, got_text, after_key, pid)
        with self._changed:
            self._state.requests.append(request)
            self._state.last_request_at = time.monotonic()
            self._changed.notify_all()

    def _payload(self, target: str) -> tuple[str, int, bytes | list[int]] | None:
        """(property type, format, data) for `target`, or None to refuse it."""
        if target == "TARGETS":
            names = ["TARGETS", "TIMESTAMP", "UTF8_STRING", "text/plain;charset=utf-8", "TEXT"]
            if self._latin1 is not None:
                names.append("STRING")
            return "ATOM", 32, [self._atom(name) for name in names]
        if target == "TIMESTAMP":
            return "INTEGER", 32, [self._acquired]
        if target in ("UTF8_STRING", "text/plain;charset=utf-8"):
            return target, 8, self._encoded
        if target == "TEXT":  # the owner picks the encoding; the type says which
            return ("STRING", 8, self._latin1) if self._latin1 is not None else ("UTF8_STRING", 8, self._encoded)
        if target == "STRING" and self._latin1 is not None:
            return "STRING", 8, self._latin1
        return None  # not Latin-1, MULTIPLE, images, ...: refused, the requestor may ask for another target

    def _lost(self, event: Any) -> None:
        selection = self._name(event.atom)
        owner = _owner_window(self._display, event.atom)
        with self._changed:
            self._state.lost_to[selection] = owner
            self._changed.notify_all()

    # -- for the caller -----------------------------------------------------------------------------

    def paste_key_pressed(self) -> None:
        """Mark that the paste key goes out now: only requests after this count as the paste."""
        with self._changed:
            self._state.paste_key_pressed = True

    def requests(self) -> list[SelectionRequest]:
        with self._changed:
            return list(self._state.requests)

    def lost(self) -> dict[str, int]:
        """Selections another program took over, with its window (0: the selection has no owner now)."""
        with self._changed:
            return dict(self._state.lost_to)

    def wait_until_taken(self, target_window: int | None, timeout_s: float) -> SelectionRequest:
        """The first request for the text, after the paste key, from `target_window`'s program.

        Its program: the same X client, or another client of the same local process (module
        docstring). With `target_window` None any program but ours counts. Raises SelectionError, in
        words, when none came within `timeout_s` (PasteNotTaken), or once another program took over
        every offered selection.
        """
        wanted = None if target_window is None else client_of(target_window, self.resource_mask)
        wanted_pid = None if target_window is None else window_pid(target_window, self.display_name)
        self._target_pid = wanted_pid
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                for request in self._state.requests:
                    client = client_of(request.requestor, self.resource_mask)
                    same_process = wanted_pid is not None and request.requestor_pid == wanted_pid
                    if (
                        request.got_text
                        and request.after_paste_key
                        and (wanted is None or client == wanted or same_process)
                    ):
                        return request
                if self._state.failure is not None:
                    raise SelectionError(f"{self._state.failure}: the paste may not have been taken")
                if all(selection in self._state.lost_to for selection in self.selections):
                    asker = "any program" if target_window is None else "the focused window"
                    raise SelectionError(
                        f"{self._describe_lost(self._state.lost_to)} before {asker} asked for the "
                        "text: it may have pasted that program's content, not Holodesk's"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    raise PasteNotTaken(self._not_taken(target_window, timeout_s))
                self._changed.wait(left)

    def wait_until_noted(self, quiet_s: float, timeout_s: float, *, copy: bool = False) -> None:
        """Return once a program asked for our targets (with `copy`, then also for the text) and then
        asked nothing for `quiet_s`.

        On XWayland the compositor asks for the targets of every new owner, and mutter then reads a
        copy of the text once the new owner is its clipboard's: until then, a Wayland program would
        paste the previous content. Raises SelectionError, in words, when that did not happen within
        `timeout_s`; the quiet part is bounded by `timeout_s` too.
        """
        deadline = time.monotonic() + timeout_s

        def noted() -> bool:
            asked = self._asked()
            return "TARGETS" in asked and (not copy or any(target in TEXT_TARGETS for target in asked))

        with self._changed:
            while not noted():
                if self._state.failure is not None:
                    raise SelectionError(f"{self._state.failure}: nothing was pasted")
                left = deadline - time.monotonic()
                if left <= 0:
                    missing = "the text's formats" if "TARGETS" not in self._asked() else "its copy of the text"
                    raise SelectionError(
                        f"the desktop did not take note of the offered text within {timeout_s:g} s (its "
                        f"XWayland clipboard bridge never asked for {missing}): nothing was pasted"
                    )
                self._changed.wait(left)
        self.wait_until_quiet(quiet_s, max(0.0, deadline - time.monotonic()))

    def _asked(self) -> list[str]:
        """The targets asked for so far, in order (lock held)."""
        return [request.target for request in self._state.requests]

    def wait_until_quiet(self, quiet_s: float, timeout_s: float) -> None:
        """Keep serving until no request came for `quiet_s` (or `timeout_s` passed).

        A program may read the text more than once for one paste: Chromium asks for it, then for the
        targets again and again, and inserts what a second read returns. Putting the previous
        content back after the first read made it paste that instead.
        """
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                now = time.monotonic()
                quiet_until = self._state.last_request_at + quiet_s
                if now >= quiet_until or now >= deadline or self._state.failure is not None:
                    return
                self._changed.wait(min(quiet_until, deadline) - now)

    def _describe_lost(self, lost_to: dict[str, int]) -> str:
        parts = [
            f"another program (window {owner:#x}) took over {selection}" if owner else f"{selection} was cleared"
            for selection, owner in lost_to.items()
        ]
        return " and ".join(parts)

    def _not_taken(self, target_window: int | None, timeout_s: float) -> str:
        who = "no program asked" if target_window is None else f"the focused window ({target_window:#x}) did not ask"
        message = f"{who} for the text within {timeout_s:g} s of the paste key: the paste was not taken"
        others = sorted(
            {
                f"{request.requestor:#x} ({request.target}"
                + (f", process {request.requestor_pid}" if request.requestor_pid is not None else "")
                + ")"
                for request in self._state.requests
                if request.after_paste_key
            }
        )
        if others:
            focused = f" (process {self._target_pid})" if self._target_pid is not None else ""
            message += f"; only other programs than the focused window's{focused} asked: windows {', '.join(others)}"
        if self._state.lost_to:
            message += f"; {self._describe_lost(self._state.lost_to)}"
        return message

    def close(self) -> None:
        """Stop serving: the thread gives up the selections nobody took from us and closes its connection."""
        if self._thread is None:
            return
        with self._changed:
            self._state.stopped = True
        os.write(self._wake_write, b"x")
        self._thread.join(STOP_TIMEOUT_S)
        alive = self._thread.is_alive()
        self._thread = None
        os.close(self._wake_read)
        os.close(self._wake_write)
        if alive:
            raise SelectionError(f"the thread serving the pasted text did not end within {STOP_TIMEOUT_S:g} s")


def focused_window(display_name: str | None = None) -> int | None:
    """The window that receives typed keys: the focus, or (when it follows the pointer) the deepest
    window under the pointer; None when keys go nowhere or no display is reachable."""
    from Xlib import X
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError):
        return None
    try:
        root = display.screen().root
        focus = display.get_input_focus().focus
        if focus == X.NONE:
            return None
        if focus != X.PointerRoot and int(focus.id) != int(root.id):
            return int(focus.id)
        window = root
        for _ in range(16):  # the deepest window under the pointer, bounded
            child = window.query_pointer().child
            if child == X.NONE or not int(getattr(child, "id", 0)):
                break
            window = child
        return None if window is root else int(window.id)
    except xerror.XError:
        return None
    finally:
        display.close()


def _owner(selection: str, display_name: str | None) -> int:
    """The window owning `selection` now, 0 when none does."""
    from Xlib import display as xdisplay
    from Xlib import error as xerror

    try:
        display = xdisplay.Display(display_name)
    except (xerror.DisplayError, OSError, KeyError) as exc:
        raise SelectionError(f"cannot open the X display: {exc}") from exc
    try:
        return _owner_window(display, display.intern_atom(selection))
    finally:
        display.close()


def _tool_for(selection: str) -> CommandClipboard:
    return XCLIP_PRIMARY if selection == "PRIMARY" else XCLIP


def restore_previous(offer: SelectionOffer, timeout_s: float) -> list[str]:
    """Put back what the selections held before `offer`, confirmed; returns what could not be, in words.

    A selection another program took over meanwhile is left to it. A previous text is handed to
    xclip, whose child keeps serving it after Holodesk exits, as the user's own program would have;
    it counts once our window no longer owns the selection and the text reads back. A selection that
    had no owner, or held no text, is given up with our connection.
    """
    problems: list[str] = []
    lost = offer.lost()
    for selection, previous in offer.previous.items():
        if selection in lost or previous.text is None:
            continue
        tool = _tool_for(selection)
        try:
            tool.write_text(previous.text)
            deadline = time.monotonic() + timeout_s
            # Bounded: xclip claims the selection in the child it forks, some time after write_text.
            while _owner(selection, offer.display_name) == offer.window_id or tool.read_text() != previous.text:
                if time.monotonic() >= deadline:
                    raise SelectionError(f"xclip did not take over {selection} within {timeout_s:g} s")
                time.sleep(0.02)
        except ClipboardError as exc:
            problems.append(f"the previous {selection} text could not be put back: {exc}")
    try:
        offer.close()
    except SelectionError as exc:
        problems.append(str(exc))
    for selection, previous in offer.previous.items():
        if selection in lost:
            problems.append(f"{selection} was left to the program that took it over during the paste")
            continue
        if previous.owned and previous.text is None:
            problems.append(f"{previous.describe()}; it is empty now")
        try:
            if _owner(selection, offer.display_name) == offer.window_id:
                problems.append(f"Holodesk's window still owns {selection}")
        except SelectionError as exc:
            problems.append(f"whether Holodesk gave up {selection} could not be checked: {exc}")
    return problems


@contextmanager
def offer(
    text: str,
    selections: Sequence[str] = SELECTIONS,
    *,
    display_name: str | None = None,
    restore_timeout_s: float = 5.0,
    restored: Callable[[list[str]], None] | None = None,
) -> Iterator[SelectionOffer]:
    """Offer `text` on `selections` (ownership confirmed) for the block, then put the previous content back.

    `restored` receives what could not be put back, in words (an empty list: everything was).
    """
    current = SelectionOffer(text, selections, display_name=display_name)
    current.start()
    try:
        yield current
    finally:
        problems = restore_previous(current, restore_timeout_s)
        if restored is not None:
            restored(problems)


def paste_with_own_selection(
    text: str,
    press_paste_key: Callable[[], None],
    *,
    host: SelectionHost = SelectionHost.X_SERVER,
    compositor_copies: bool = False,
    display_name: str | None = None,
    timeout_s: float = 5.0,
    quiet_s: float = 0.3,
) -> str:
    """Offer `text`, press the paste key, wait until the paste took the text and nothing asked for
    `quiet_s`, restore.

    On an X server the offer is CLIPBOARD and PRIMARY, and only the focused window's program taking
    the text counts; on XWayland it is CLIPBOARD, the key waits until the compositor noted the offer
    (with `compositor_copies`, until it also read its copy: mutter), and any program's request after
    the key counts (module docstring). Returns a note for the step's
    result (who took it, what could not be put back). Raises SelectionError when the text was not
    taken (PasteNotTaken when the key was pressed and nobody asked): then the previous content is
    back all the same.
    """
    problems: list[str] = []
    selections = SELECTIONS if host is SelectionHost.X_SERVER else ("CLIPBOARD",)
    try:
        with offer(
            text, selections, display_name=display_name, restore_timeout_s=timeout_s, restored=problems.extend
        ) as current:
            if host is SelectionHost.XWAYLAND:
                current.wait_until_noted(quiet_s, timeout_s, copy=compositor_copies)
                target = None
            else:
                target = focused_window(display_name)
            current.paste_key_pressed()
            press_paste_key()
            taken = current.wait_until_taken(target, timeout_s)
            # A compositor that keeps its own copy serves the Wayland program's read from it, and no
            # request reaches us; putting the previous text back replaces its source and cancels a read
            # still under way (GTK: "error reading selection buffer: Operation was cancelled", seen on a
            # loaded machine). So the offer stays up longer after the key there.
            current.wait_until_quiet(
                max(quiet_s, COPYING_COMPOSITOR_QUIET_S) if compositor_copies else quiet_s, timeout_s
            )
    except SelectionError as exc:
        if problems:
            raise type(exc)(f"{exc}; {'; '.join(problems)}") from exc
        raise
    through = " on XWayland" if host is SelectionHost.XWAYLAND else ""
    note = f"taken from {taken.selection}{through} by window {taken.requestor:#x}"
    if problems:
        note += "; " + "; ".join(problems)
    return note
