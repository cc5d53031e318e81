"""The typed seam an input backend implements: it reads what the plan needs and performs primitives.

A backend declares what it can do as data (`InputCapabilities`), never probed. It checks each
primitive before anything is sent (`check`: ActionError, in words, for a key the layout lacks or a
clipboard that does not work), and performs one primitive at a time inside `acting`, which opens
what input needs and turns the desktop's refusals into DesktopRefused. Implementations:
automation.input.x11 (XTEST) and automation.input.portal (the Wayland RemoteDesktop portal).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from holodesk.automation.actions import Action
from holodesk.automation.cancel import CancelToken
from holodesk.automation.coords import Monitor
from holodesk.automation.input.injected import InjectedInput
from holodesk.automation.input.plan import InputTarget
from holodesk.automation.input.primitives import Primitive


@dataclass(frozen=True, slots=True)
class Unconfirmed:
    """What `perform` gives back when keys went out but the program they went to could not be shown
    to have read them as sent (keys on temporarily bound keycodes, automation.input.x11.unread):
    `why`, in words, and the step's usual note. The step's result then never says "typed"."""

    why: str
    note: str = ""


@dataclass(frozen=True, slots=True)
class InputCapabilities:
    """What a backend can do, declared. `knows_focused_program`: it can name the program keys go to
    (else the plan refuses options that depend on it); `refuses_corners`: points on a monitor's corner
    pixel stop the run there (pyautogui's fail-safe), so they are refused."""

    name: str
    knows_focused_program: bool
    refuses_corners: bool


class InputBackend(Protocol):
    """Performs primitive input steps on one desktop."""

    @property
    def capabilities(self) -> InputCapabilities: ...

    @property
    def injected(self) -> InjectedInput:
        """The log of keys this backend presses, shared with the kill-switch listener."""
        ...

    def monitors(self) -> tuple[Monitor, ...]: ...

    def input_target(self, action: Action) -> InputTarget:
        """What the plan needs to know for `action` (focused program, its keys, the text's route)."""
        ...

    def check(self, step: Primitive) -> None:
        """ActionError (or ClipboardError), in words, if `step` cannot be performed; sends nothing."""
        ...

    def acting(self, action: Action, steps: tuple[Primitive, ...]) -> AbstractContextManager[None]:
        """Around the steps of one action: opens the devices, releases what it held, and turns the
        desktop's refusals into DesktopRefused (a stop stays Cancelled)."""
        ...

    def perform(self, step: Primitive, cancel: CancelToken) -> str | Unconfirmed:
        """Send one primitive; returns words on how it went ("" when there is nothing to add), or
        Unconfirmed when what the program received cannot be known."""
        ...

    def close(self) -> None:
        """Give back what the backend set up on the desktop (bound keycodes, devices)."""
        ...
