"""The Wayland executor: Executor's interface, with input sent through the portal's Notify methods.

Validation first, as on X11: every point must lie on a shared monitor, every key must have a keysym
the desktop's keyboard layout has, every character of text must be typable; a rejected action sends
nothing. Points are converted from screen space (physical pixels) to the stream's logical pixels of
the monitor they fall on. Text is typed by keysym when the compositor's keymap has every character
(mutter drops keysyms its layout lacks, silently: automation.wayland.keymap); otherwise it is pasted
through the clipboard with ctrl+v, and the step's result says so, as on X11. A CancelToken is
checked between sub-steps, and buttons and keys held are released in `finally`.

Every option is honoured or refused before anything is sent: overwrite selects all with ctrl+a,
press_enter presses Enter after the text (or alone, for an empty text), a key combination is
pressed `repeat` times, hold-and-tap holds its keys around the taps. Overwrite together with Enter
is refused: Wayland does not say which window has the focus, and in a terminal ctrl+a is not
select-all, so Enter would run the line.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from holodesk.automation.actions import (
    Action,
    AskUser,
    Click,
    Done,
    Drag,
    HoldAndTap,
    KeyCombo,
    MouseButton,
    Move,
    Point,
    Scroll,
    ScrollDirection,
    TypeText,
    UpdatePlan,
    Wait,
)
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import WL_CLIPBOARD, XCLIP, Clipboard
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.errors import ActionError, AutomationError, ClipboardError, ExecutionError, OffScreenError
from holodesk.automation.executor import ExecutionResult, InjectedInput, drag_path, keys_for_text
from holodesk.automation.keys import normalize_key
from holodesk.automation.wayland.keymap import CompositorKeymap, compositor_keymap
from holodesk.automation.wayland.keysyms import key_keysym, text_keysyms
from holodesk.automation.wayland.portal import PortalError, PortalSession
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession

# evdev button codes (linux/input-event-codes.h), which NotifyPointerButton takes.
EVDEV_BUTTONS = {MouseButton.LEFT: 0x110, MouseButton.RIGHT: 0x111, MouseButton.MIDDLE: 0x112}
AXIS_VERTICAL = 0
AXIS_HORIZONTAL = 1
SHIFT_KEYSYM = 0xFFE1
# Wayland offers no way to learn which window has the focus, so the paste key is the common one
# (terminals want ctrl+shift+v: the step's result names the key, and the next frame shows the effect).
PASTE_KEYS = ("ctrl", "v")
SELECT_ALL_KEYS = ("ctrl", "a")
ENTER_KEYS = ("enter",)


@dataclass(frozen=True, slots=True)
class TextPlan:
    """How a text goes out: by these keysyms, or (keysyms None) pasted because of `missing`."""

    keysyms: tuple[int, ...] | None
    missing: tuple[str, ...]
    layouts: tuple[str, ...]


def wayland_clipboard(
    env: Mapping[str, str] | None = None, which: Callable[[str], str | None] = shutil.which
) -> Clipboard:
    """The clipboard tool for a Wayland session, or ClipboardError saying what to install.

    xclip through XWayland first: mutter bridges the X CLIPBOARD to Wayland clients, and xclip needs
    no window. wl-copy needs the data-control protocol, which mutter lacks, and otherwise maps a
    window to take the keyboard focus, which would take it from the field being typed into.
    """
    env = os.environ if env is None else env
    if env.get("DISPLAY") and which("xclip"):
        return XCLIP
    if which("wl-copy") and which("wl-paste"):
        return WL_CLIPBOARD
    raise ClipboardError(
        "no clipboard tool for this Wayland session: install xclip (the desktop's XWayland carries its "
        "clipboard; Debian/Ubuntu: apt install xclip) or wl-clipboard"
    )


class WaylandExecutor:
    """Performs screen-space actions through a WaylandSession (shared with WaylandCapture)."""

    def __init__(
        self,
        session: WaylandSession,
        *,
        injected: InjectedInput | None = None,
        multi_click_interval_s: float = 0.04,
        key_interval_s: float = 0.004,
        drag_step_px: int = 12,
        drag_step_interval_s: float = 0.008,
        focus_settle_s: float = 0.05,
        device_warmup_s: float = 0.3,
        clipboard: Clipboard | None = None,
        paste_settle_s: float = 0.3,
        keymap: Callable[[], CompositorKeymap] = compositor_keymap,
    ) -> None:
        if drag_step_px < 1:
            raise ValueError("drag_step_px must be at least 1")
        self.session = session
        self.injected = injected if injected is not None else InjectedInput()
        self.multi_click_interval_s = multi_click_interval_s
        self.key_interval_s = key_interval_s
        self.drag_step_px = drag_step_px
        self.drag_step_interval_s = drag_step_interval_s
        self.focus_settle_s = focus_settle_s
        self.device_warmup_s = device_warmup_s
        self.paste_settle_s = paste_settle_s
        self._clipboard = clipboard
        self._keymap = keymap
        self._busy = threading.Lock()
        self._warmed_up = False

    # -- validation: nothing here sends input ----------------------------------------------------

    def monitors(self) -> tuple[Monitor, ...]:
        return tuple(entry.monitor for entry in self.session.started()[1])

    def validate(self, action: Action) -> None:
        """Raise ActionError or OffScreenError if the action cannot be performed."""
        self._validate(action)

    def _validate(self, action: Action) -> None:
        if isinstance(action, Done | AskUser):
            raise ActionError(f"{action.kind!r} is not executable: it ends the run or asks the user, it sends no input")
        if not isinstance(action, Click | Move | Drag | Scroll | TypeText | KeyCombo | HoldAndTap | Wait | UpdatePlan):
            raise ActionError(f"the executor does not know how to perform {type(action).__name__}")
        points = action.points()
        if points:
            monitors = self.monitors()
            for point in points:
                monitor_at(point, monitors)
        if isinstance(action, KeyCombo):
            self._combo_keysyms(action.keys)
        elif isinstance(action, HoldAndTap):
            self._combo_keysyms((*action.hold, *action.taps))
        elif isinstance(action, TypeText):
            self._validate_typing(action)

    def _validate_typing(self, action: TypeText) -> None:
        """The text can go out and each option can be honoured, or ActionError says which cannot."""
        if action.overwrite and action.press_enter:
            # Wayland tells no client which window has the focus: a terminal cannot be ruled out.
            raise ActionError(
                "overwrite with press_enter is refused on Wayland: Holodesk cannot see which program has the "
                "focus there, and in a terminal select-all (ctrl+a) moves to the start of the shell's line, so "
                "Enter would run what was already on it; type with overwrite, then press Enter as its own step"
            )
        if action.overwrite:
            self._combo_keysyms(SELECT_ALL_KEYS)
        if action.press_enter:
            self._combo_keysyms(ENTER_KEYS)
        if action.text:
            self._text_plan(action.text)

    def _layout(self) -> CompositorKeymap:
        """The desktop's keymap now; the session is started first (its keyboard makes the seat have one)."""
        self.session.started()
        return self._keymap()

    def _combo_keysyms(self, keys: Sequence[str]) -> list[int]:
        keysyms = [key_keysym(key) for key in keys]
        keymap = self._layout()
        for key, keysym in zip(keys, keysyms, strict=True):
            missing = keymap.missing_from(keysym)
            if missing:
                raise ActionError(
                    f"the key {key!r} is not on the desktop's keyboard layout ({', '.join(missing)}), "
                    "so the desktop would ignore it"
                )
        return keysyms

    def _text_plan(self, text: str) -> TextPlan:
        """Type by keysym when the layout has every character; else paste (the clipboard must work)."""
        unicode_keysyms = text_keysyms(text)  # ActionError for control characters
        keymap = self._layout()
        keysyms: list[int] = []
        missing: list[str] = []
        for character, unicode_keysym in zip(text, unicode_keysyms, strict=True):
            keysym = keymap.keysym_for(character, unicode_keysym)
            if keysym is None:
                if character not in missing:
                    missing.append(character)
            else:
                keysyms.append(keysym)
        if not missing:
            return TextPlan(tuple(keysyms), (), keymap.layout_names)
        shown = ", ".join(repr(character) for character in missing[:8]) + (" ..." if len(missing) > 8 else "")
        layouts = ", ".join(keymap.layout_names)
        try:
            self._resolve_clipboard()
            self._combo_keysyms(PASTE_KEYS)
        except (ClipboardError, ActionError) as exc:
            raise ActionError(
                f"the desktop's keyboard layout ({layouts}) has no key for {shown}, and pasting it is not "
                f"possible either: {exc}. Add a layout that has them, or make the clipboard work"
            ) from exc
        return TextPlan(None, tuple(missing), keymap.layout_names)

    def _resolve_clipboard(self) -> Clipboard:
        if self._clipboard is None:
            self._clipboard = wayland_clipboard()
        return self._clipboard

    # -- execution -------------------------------------------------------------------------------

    def execute(self, action: Action, cancel: CancelToken | None = None) -> ExecutionResult:
        """Validate, then perform the action (same contract as automation.executor.Executor.execute).

        ActionError / OffScreenError: nothing was sent. ExecutionError: the portal session could not
        be started (nothing was sent). Cancelled: `cancel` fired; what was held is released first.
        A valid action the desktop refused part-way returns ok=False with the reason.
        """
        started = time.monotonic()
        cancel = cancel if cancel is not None else CancelToken()
        with self._busy:
            try:
                self._validate(action)
            except (ActionError, OffScreenError, ExecutionError):
                raise
            except AutomationError as exc:  # the session could not start: no input was sent
                raise ExecutionError(f"cannot send input: {exc}") from exc
            cancel.raise_if_cancelled()
            if isinstance(action, UpdatePlan):  # a plan changes nothing on screen
                return ExecutionResult(action, True, action.listing(), time.monotonic() - started)
            if isinstance(action, Wait):
                if cancel.sleep(action.seconds):
                    cancel.raise_if_cancelled()
                return ExecutionResult(action, True, action.describe(), time.monotonic() - started)
            portal, monitors = self.session.started()
            if not portal.pointer_allowed or not portal.keyboard_allowed:
                raise ExecutionError(
                    "the desktop shares the screen but did not allow remote interaction: "
                    "turn on 'Allow Remote Interaction' in its dialog and start again"
                )
            try:
                self._warm_up(portal, monitors)
                detail = self._perform(action, portal, monitors, cancel)
            except PortalError as exc:
                return ExecutionResult(action, False, f"{action.describe()} failed: {exc}", time.monotonic() - started)
            except ClipboardError as exc:
                return ExecutionResult(
                    action, False, f"{action.describe()} failed: the clipboard: {exc}", time.monotonic() - started
                )
            finally:
                self.session.note_input()
            return ExecutionResult(action, True, detail, time.monotonic() - started)

    def _warm_up(self, portal: PortalSession, monitors: Sequence[StreamMonitor]) -> None:
        """Wake the new virtual devices: mutter drops the first events after they appear."""
        if self._warmed_up:
            return
        entry = monitors[0]
        portal.pointer_motion_absolute(entry.stream, entry.stream.size[0] / 2, entry.stream.size[1] / 2)
        portal.keyboard_keysym(SHIFT_KEYSYM, True)
        portal.keyboard_keysym(SHIFT_KEYSYM, False)
        time.sleep(self.device_warmup_s)
        self._warmed_up = True

    def _move(self, portal: PortalSession, monitors: Sequence[StreamMonitor], point: Point) -> None:
        monitor = monitor_at(point, [entry.monitor for entry in monitors])
        entry = next(item for item in monitors if item.monitor == monitor)
        scale = monitor.scale
        # The pixel's own corner, in the stream's logical pixels: Qt and GTK round positions, so the
        # pixel's centre (x + 0.5) would land on the next pixel.
        x = (point.x - monitor.rect.left) / scale
        y = (point.y - monitor.rect.top) / scale
        portal.pointer_motion_absolute(entry.stream, x, y)

    def _perform(
        self, action: Action, portal: PortalSession, monitors: Sequence[StreamMonitor], cancel: CancelToken
    ) -> str:
        """Send the action's input; returns the step's result text (which way text went)."""
        if isinstance(action, Click):
            self._move(portal, monitors, action.at)
            for index in range(action.count):
                if index and cancel.sleep(self.multi_click_interval_s):
                    cancel.raise_if_cancelled()
                self._click(portal, action.button)
        elif isinstance(action, Move):
            self._move(portal, monitors, action.to)
        elif isinstance(action, Drag):
            self._drag(action, portal, monitors, cancel)
        elif isinstance(action, Scroll):
            if action.at is not None:
                self._move(portal, monitors, action.at)
            vertical = action.direction in (ScrollDirection.UP, ScrollDirection.DOWN)
            step = -1 if action.direction in (ScrollDirection.UP, ScrollDirection.LEFT) else 1
            for _ in range(action.amount):
                cancel.raise_if_cancelled()
                portal.pointer_axis_discrete(AXIS_VERTICAL if vertical else AXIS_HORIZONTAL, step)
        elif isinstance(action, TypeText):
            return self._type_with_options(action, portal, monitors, cancel)
        elif isinstance(action, KeyCombo):
            keysyms = self._combo_keysyms(action.keys)
            for index in range(action.repeat):
                if index and cancel.sleep(self.key_interval_s):
                    cancel.raise_if_cancelled()
                self._press_keys(keysyms, action.keys, portal, cancel)
            times = f", {action.repeat} times" if action.repeat > 1 else ""
            return f"{action.describe()} (sent {'+'.join(action.keys)} by keysym{times})"
        elif isinstance(action, HoldAndTap):
            self._hold_and_tap(action, portal, cancel)
        return action.describe()

    def _type_with_options(
        self, action: TypeText, portal: PortalSession, monitors: Sequence[StreamMonitor], cancel: CancelToken
    ) -> str:
        """Click `at`, select all (`overwrite`), type, press Enter (`press_enter`); the result lists what was sent."""
        if action.at is not None:
            self._move(portal, monitors, action.at)
            self._click(portal, MouseButton.LEFT)
            if cancel.sleep(self.focus_settle_s):
                cancel.raise_if_cancelled()
        sent: list[str] = []
        if action.overwrite:
            self._press_keys(self._combo_keysyms(SELECT_ALL_KEYS), SELECT_ALL_KEYS, portal, cancel)
            sent.append(f"pressed {'+'.join(SELECT_ALL_KEYS)} to select the field's text")
        if action.text:
            sent.append(self._type(action.text, portal, cancel))
        if action.press_enter:
            cancel.raise_if_cancelled()
            self._press_keys(self._combo_keysyms(ENTER_KEYS), ENTER_KEYS, portal, cancel)
            sent.append("pressed enter")
        if not (action.overwrite or action.press_enter):
            return sent[0]
        return f"{action.describe()}: {'; '.join(sent)}"

    def _hold_and_tap(self, action: HoldAndTap, portal: PortalSession, cancel: CancelToken) -> None:
        """Hold `hold` down, press and release each tap in order, release `hold` in reverse (also on a stop)."""
        held = self._combo_keysyms(action.hold)
        taps = self._combo_keysyms(action.taps)
        pressed: list[int] = []
        with self.injected.holding(normalize_key(key) for key in (*action.hold, *action.taps)):
            try:
                for keysym in held:
                    cancel.raise_if_cancelled()
                    portal.keyboard_keysym(keysym, True)
                    pressed.append(keysym)
                for keysym in taps:
                    cancel.raise_if_cancelled()
                    portal.keyboard_keysym(keysym, True)
                    portal.keyboard_keysym(keysym, False)
                    if self.key_interval_s:
                        time.sleep(self.key_interval_s)
            finally:
                for keysym in reversed(pressed):
                    with contextlib.suppress(PortalError):
                        portal.keyboard_keysym(keysym, False)

    def _click(self, portal: PortalSession, button: MouseButton) -> None:
        code = EVDEV_BUTTONS[MouseButton(button)]
        portal.pointer_button(code, True)
        portal.pointer_button(code, False)

    def _drag(
        self, action: Drag, portal: PortalSession, monitors: Sequence[StreamMonitor], cancel: CancelToken
    ) -> None:
        code = EVDEV_BUTTONS[MouseButton(action.button)]
        self._move(portal, monitors, action.start)
        portal.pointer_button(code, True)
        try:
            for point in drag_path(action.start, action.end, self.drag_step_px):
                if cancel.sleep(self.drag_step_interval_s):
                    cancel.raise_if_cancelled()
                self._move(portal, monitors, point)
        finally:
            portal.pointer_button(code, False)

    def _type(self, text: str, portal: PortalSession, cancel: CancelToken) -> str:
        described = TypeText(text).describe()
        plan = self._text_plan(text)
        if plan.keysyms is None:
            self._paste(text, portal, cancel)
            missing = ", ".join(repr(character) for character in plan.missing[:8])
            return (
                f"{described} (pasted through the clipboard with {'+'.join(PASTE_KEYS)}: the keyboard layout "
                f"({', '.join(plan.layouts)}) has no key for {missing})"
            )
        for character, keysym in zip(text, plan.keysyms, strict=True):
            cancel.raise_if_cancelled()
            with self.injected.holding(keys_for_text(character)):
                portal.keyboard_keysym(keysym, True)
                portal.keyboard_keysym(keysym, False)
            if self.key_interval_s:
                time.sleep(self.key_interval_s)
        return f"{described} (typed by keysym)"

    def _paste(self, text: str, portal: PortalSession, cancel: CancelToken) -> None:
        clipboard = self._resolve_clipboard()
        previous = clipboard.read_text()
        clipboard.write_text(text)
        try:
            cancel.raise_if_cancelled()
            self._press_keys(self._combo_keysyms(PASTE_KEYS), PASTE_KEYS, portal, cancel)
            # The target fetches the clipboard after ctrl+v, asynchronously (through mutter's
            # XWayland bridge); restoring sooner would paste the old content. Not cancellable.
            time.sleep(self.paste_settle_s)
        finally:
            # Restore what the user had; with no text there (empty, an image), leave nothing behind.
            clipboard.write_text(previous if previous is not None else "")

    def _press_keys(
        self, keysyms: Sequence[int], keys: Sequence[str], portal: PortalSession, cancel: CancelToken
    ) -> None:
        pressed: list[int] = []
        with self.injected.holding(normalize_key(key) for key in keys):
            try:
                for keysym in keysyms:
                    cancel.raise_if_cancelled()
                    portal.keyboard_keysym(keysym, True)
                    pressed.append(keysym)
            finally:
                for keysym in reversed(pressed):
                    # If the session is gone the compositor releases its devices' keys itself.
                    with contextlib.suppress(PortalError):
                        portal.keyboard_keysym(keysym, False)
