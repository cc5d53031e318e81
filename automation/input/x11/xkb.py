"""The X keyboard extension's live state: which layout group is active, which modifiers are locked.

python-xlib has no XKB module, so the three requests needed are declared here from the protocol
(XkbUseExtension, XkbGetState, XkbLatchLockState). The core keymap lists every group's symbols
(group 1 levels 1-2, group 2 levels 1-2, then the higher levels), but only XKB says which group a
key press will use now: a user with `us,ru` who switched to Russian types Cyrillic with the same
keycodes.

Callers pass an open python-xlib Display; nothing here opens one.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

from Xlib.protocol import rq

XKB_USE_CORE_KEYBOARD = 0x0100
LOCK_MASK = 0x02  # X's LockMask: Caps Lock (or Shift Lock) is locked


# Connections that already sent XkbUseExtension (the server refuses other XKB requests before it).
_OPCODES: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


class XkbUnavailable(RuntimeError):
    """The X server has no XKB extension, or refused to let this connection use it."""


class _UseExtension(rq.ReplyRequest):  # type: ignore[misc]  # python-xlib is untyped
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(0),
        rq.RequestLength(),
        rq.Card16("wanted_major"),
        rq.Card16("wanted_minor"),
    )
    _reply = rq.Struct(
        rq.ReplyCode(),
        rq.Bool("supported"),
        rq.Card16("sequence_number"),
        rq.ReplyLength(),
        rq.Card16("server_major"),
        rq.Card16("server_minor"),
        rq.Pad(20),
    )


class _GetState(rq.ReplyRequest):  # type: ignore[misc]
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(4),
        rq.RequestLength(),
        rq.Card16("device_spec"),
        rq.Pad(2),
    )
    _reply = rq.Struct(
        rq.ReplyCode(),
        rq.Card8("device_id"),
        rq.Card16("sequence_number"),
        rq.ReplyLength(),
        rq.Card8("mods"),
        rq.Card8("base_mods"),
        rq.Card8("latched_mods"),
        rq.Card8("locked_mods"),
        rq.Card8("group"),
        rq.Card8("locked_group"),
        rq.Int16("base_group"),
        rq.Int16("latched_group"),
        rq.Card8("compat_state"),
        rq.Card8("grab_mods"),
        rq.Card8("compat_grab_mods"),
        rq.Card8("lookup_mods"),
        rq.Card8("compat_lookup_mods"),
        rq.Pad(1),
        rq.Card16("ptr_btn_state"),
        rq.Pad(6),
    )


class _LatchLockState(rq.Request):  # type: ignore[misc]
    _request = rq.Struct(
        rq.Card8("opcode"),
        rq.Opcode(5),
        rq.RequestLength(),
        rq.Card16("device_spec"),
        rq.Card8("affect_mod_locks"),
        rq.Card8("mod_locks"),
        rq.Bool("lock_group"),
        rq.Card8("group_lock"),
        rq.Card8("affect_mod_latches"),
        rq.Card8("mod_latches"),
        rq.Pad(1),
        rq.Bool("latch_group"),
        rq.Int16("group_latch"),
    )


@dataclass(frozen=True, slots=True)
class XkbState:
    """The keyboard state that decides what a key press means: `group` counts from 0."""

    group: int
    locked_mods: int

    @property
    def caps_locked(self) -> bool:
        return bool(self.locked_mods & LOCK_MASK)


def _opcode(display: Any) -> int:
    """The XKEYBOARD major opcode, after announcing this connection to the extension (once)."""
    cached = _OPCODES.get(display)
    if cached is not None:
        return cached
    info = display.query_extension("XKEYBOARD")
    if info is None or not info.present:
        raise XkbUnavailable("the X server has no XKEYBOARD extension")
    reply = _UseExtension(display=display.display, opcode=info.major_opcode, wanted_major=1, wanted_minor=0)
    if not reply.supported:
        raise XkbUnavailable(f"the X server's XKB {reply.server_major}.{reply.server_minor} refused version 1.0")
    _OPCODES[display] = int(info.major_opcode)
    return int(info.major_opcode)


def read_state(display: Any) -> XkbState:
    """The core keyboard's effective group and locked modifiers, as the server has them now."""
    reply = _GetState(display=display.display, opcode=_opcode(display), device_spec=XKB_USE_CORE_KEYBOARD)
    return XkbState(group=int(reply.group), locked_mods=int(reply.locked_mods))


def lock(display: Any, *, group: int | None = None, unlock_mods: int = 0, lock_mods: int = 0) -> None:
    """Lock the layout group `group` and/or set the locked state of the modifiers in the two masks."""
    _LatchLockState(
        display=display.display,
        opcode=_opcode(display),
        device_spec=XKB_USE_CORE_KEYBOARD,
        affect_mod_locks=unlock_mods | lock_mods,
        mod_locks=lock_mods,
        lock_group=group is not None,
        group_lock=group or 0,
        affect_mod_latches=0,
        mod_latches=0,
        latch_group=False,
        group_latch=0,
    )
    display.sync()
