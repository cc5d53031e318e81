"""The Wayland input backend: primitives through the RemoteDesktop portal's Notify methods.

Points are converted from screen space (physical pixels) to the stream's logical pixels of the
monitor they fall on. Keys go by keysym, checked against the compositor's keymap (mutter drops
keysyms its active layout lacks, silently, and which layout is active is not told to this client:
automation.wayland.keymap); text is typed when every layout has every character, else pasted
through the clipboard with ctrl+v, and the step's result says so. A character goes by keycode on
the keys every layout gives it on (Shift or AltGr, then its key), so that its release is exact;
by keysym only where the layouts differ, for mutter to find the active one's key. In a key combination
holding ctrl, alt or super, a key some layout lacks (v with Russian active) is pressed by keycode
on the key that has it in the first layout that does, as a user presses ctrl+v there: programs
read a shortcut's letter from that key, and the result names the key. Where XWayland runs (GNOME
sessions have it) the paste goes through Holodesk's own owner of XWayland's CLIPBOARD, which mutter
bridges to Wayland programs: the user's text is put back once the paste asked for the offered one
(automation.input.x11.selection), and a paste nobody took (a terminal, whose paste key is not
ctrl+v) is a failed step whose words say what the key may have left there (bash: quoted-insert);
without XWayland wl-clipboard carries it, and the user's text is put back after a fixed wait,
which the result says. Wayland does not say which program has the keyboard
focus, so this backend declares that it cannot tell: the plan then refuses overwrite (in a terminal
ctrl+a is not select-all). Buttons and keys held are released in `finally`, each by the code it was
pressed by.
On KDE, whose portal finds a keysym in the keymap's first layout only, text goes by keycode on the
keys of the layout KWin says is active (automation.input.portal.typing_keys), never by keysym.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from holodesk.automation.actions import Action, MouseButton, Point, ScrollDirection, TypeText
from holodesk.automation.cancel import CancelToken
from holodesk.automation.clipboard import WL_CLIPBOARD, XCLIP, Clipboard
from holodesk.automation.coords import Monitor, monitor_at
from holodesk.automation.errors import ActionError, AutomationError, ClipboardError, DesktopRefused, ExecutionError
from holodesk.automation.input.backend import InputCapabilities
from holodesk.automation.input.injected import InjectedInput, keys_for_text
from holodesk.automation.input.plan import TYPED, InputTarget, TextRoute
from holodesk.automation.input.portal.typing_keys import EVDEV_KEYCODE_OFFSET, CharacterKeys, Keyboard, kde_keyboard
from holodesk.automation.input.primitives import (
    ButtonClicks,
    ButtonDrag,
    KeyPresses,
    PastedText,
    Pause,
    PointerTo,
    Primitive,
    TypedText,
    WheelScroll,
    drag_path,
)
from holodesk.automation.input.x11.selection import (
    PasteNotTaken,
    SelectionHost,
    check_offer_size,
    paste_with_own_selection,
)
from holodesk.automation.keys import SHORTCUT_MODIFIERS, normalize_key
from holodesk.automation.wayland.kde_layout import ActiveLayout, LayoutUnknown, is_kde, kwin_active_layout
from holodesk.automation.wayland.keymap import CompositorKeymap, compositor_keymap
from holodesk.automation.wayland.keysyms import key_keysym, text_keysyms
from holodesk.automation.wayland.portal import PortalError, PortalSession
from holodesk.automation.wayland.session import StreamMonitor, WaylandSession

# evdev button codes (linux/input-event-codes.h), which NotifyPointerButton takes.
EVDEV_BUTTONS = {MouseButton.LEFT: 0x110, MouseButton.RIGHT: 0x111, MouseButton.MIDDLE: 0x112}
AXIS_VERTICAL = 0
AXIS_HORIZONTAL = 1
SHIFT_KEYSYM = 0xFFE1
# Wayland offers no way to learn which window has the focus, so the paste key is the common one; a
# terminal does not paste with it, asks nothing, and the step then fails in words (see _paste).
PASTE_KEYS = ("ctrl", "v")
SELECT_ALL_KEYS = ("ctrl", "a")

# How the keys went (by keysym or keycode, which layout's key): for the log, not the step's result,
# which says what happened in a person's words (as the X11 backend).
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PortalKey:
    """One key of a combination as the portal presses it: by keysym, or by the evdev code of the key
    that has it in layout `layout` (counted from 1) when some layout lacks the keysym."""

    name: str
    keysym: int
    evdev_code: int | None = None
    layout: int = 0

    def send(self, portal: PortalSession, pressed: bool) -> None:
        if self.evdev_code is None:
            portal.keyboard_keysym(self.keysym, pressed)
        else:
            portal.keyboard_keycode(self.evdev_code, pressed)

    @property
    def words(self) -> str:
        """The key as the step's result names it: "v (the key that has v in layout 1)" when by keycode."""
        if self.evdev_code is None:
            return self.name
        return f"{self.name} (the key that has {self.name} in layout {self.layout})"


def wayland_clipboard(
    env: Mapping[str, str] | None = None, which: Callable[[str], str | None] = shutil.which
) -> Clipboard:
    """The clipboard tool for a Wayland session, or ClipboardError saying what to install.

    xclip through XWayland first: mutter bridges the X CLIPBOARD to Wayland clients, so Holodesk
    offers the text there itself and xclip puts the user's text back (it needs no window). wl-copy
    needs the data-control protocol, which mutter lacks, and otherwise maps a window to take the
    keyboard focus, which would take it from the field being typed into.
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


class PortalInput:
    """The Wayland input backend (automation.input.backend.InputBackend), on a WaylandSession shared
    with WaylandCapture."""

    def __init__(
        self,
        session: WaylandSession,
        *,
        injected: InjectedInput | None = None,
        multi_click_interval_s: float = 0.2,
        scroll_notch_interval_s: float = 0.04,
        key_interval_s: float = 0.004,
        drag_step_px: int = 12,
        drag_step_interval_s: float = 0.008,
        focus_settle_s: float = 0.05,
        device_warmup_s: float = 0.3,
        scroll_settle_s: float = 0.3,
        clipboard: Clipboard | None = None,
        paste_timeout_s: float = 5.0,
        paste_settle_s: float = 0.3,
        keymap: Callable[[], CompositorKeymap] = compositor_keymap,
        kde: bool | None = None,
        active_layout: Callable[[], ActiveLayout] = kwin_active_layout,
    ) -> None:
        if drag_step_px < 1:
            raise ValueError("drag_step_px must be at least 1")
        self.session = session
        self._injected = injected if injected is not None else InjectedInput()
        # Mutter stamps each event with the time it handles the portal's call, not the time it was sent:
        # a stalled desktop handles a backlog in one go, and two presses stamped the same millisecond
        # are no double click to Qt 6 (it needs a time between presses above 0 and below the desktop's
        # double-click interval, 400 ms in GNOME). 0.2 s is a person's pace, half that interval: a
        # stall of under 0.2 s between the two presses can neither merge nor part them.
        self.multi_click_interval_s = multi_click_interval_s
        self.scroll_notch_interval_s = scroll_notch_interval_s
        self.key_interval_s = key_interval_s
        self.drag_step_px = drag_step_px
        self.drag_step_interval_s = drag_step_interval_s
        self.focus_settle_s = focus_settle_s
        self.device_warmup_s = device_warmup_s
        # After a scroll, the motion that hands the window its last notch must be handled before the
        # next action's motion: a loaded fresh-clone run saw the notch at the next click's spot after a
        # settle of 0.1 s (likely a stalled mutter taking both motions in one go, the last one winning).
        self.scroll_settle_s = scroll_settle_s
        # Through XWayland: the bound on each wait for the desktop (noting the offer, the paste asking).
        self.paste_timeout_s = paste_timeout_s
        # Through wl-clipboard only, which cannot tell when the paste took the text: a fixed wait.
        self.paste_settle_s = paste_settle_s
        self._clipboard = clipboard
        self._keymap = keymap
        # KDE's portal types keysyms in the first layout only: text goes by the active layout's keycodes.
        self._kde = is_kde(os.environ) if kde is None else kde
        self._active_layout = active_layout
        self._warmed_up = False
        self._portal: PortalSession | None = None
        self._streams: tuple[StreamMonitor, ...] = ()
        self._pointer_at: Point | None = None  # where this backend last put the pointer

    @property
    def capabilities(self) -> InputCapabilities:
        return InputCapabilities(name="Wayland portal", knows_focused_program=False, refuses_corners=False)

    @property
    def injected(self) -> InjectedInput:
        return self._injected

    def close(self) -> None:
        """Nothing to give back: the portal session belongs to the WaylandSession (closed with the capture)."""

    # -- what the plan needs, and checks: nothing here sends input -------------------------------

    def monitors(self) -> tuple[Monitor, ...]:
        return tuple(entry.monitor for entry in self._started()[1])

    def _started(self) -> tuple[PortalSession, tuple[StreamMonitor, ...]]:
        try:
            portal, monitors = self.session.started()
        except (ActionError, ExecutionError):
            raise
        except AutomationError as exc:  # the session could not start: no input was sent
            raise ExecutionError(f"cannot send input: {exc}") from exc
        return portal, tuple(monitors)

    def input_target(self, action: Action) -> InputTarget:
        route = self._text_route(action.text) if isinstance(action, TypeText) and action.text else TYPED
        return InputTarget(None, SELECT_ALL_KEYS, PASTE_KEYS, route, self.focus_settle_s)

    def check(self, step: Primitive) -> None:
        if isinstance(step, KeyPresses):
            self._combo_keys(step.hold, step.taps)
        elif isinstance(step, TypedText):
            self._text_keys(step.text)
        elif isinstance(step, PastedText):
            self._check_paste(step)

    def _layout(self) -> CompositorKeymap:
        """The desktop's keymap now; the session is started first (its keyboard makes the seat have one)."""
        self._started()
        return self._keymap()

    def _combo_keys(self, hold: Sequence[str], taps: Sequence[str]) -> tuple[list[PortalKey], list[PortalKey]]:
        """How each held and tapped key is pressed; ActionError when the desktop would ignore one."""
        shortcut = any(normalize_key(key) in SHORTCUT_MODIFIERS for key in hold)
        keyboard = self._keyboard()
        keymap = keyboard.keymap

        def resolve(key: str) -> PortalKey:
            keysym = key_keysym(key)
            missing = keymap.missing_from(keysym)
            if not missing:  # mutter finds it in whichever layout is active
                if not shortcut and keyboard.keysym_lands_elsewhere(keysym):
                    return _active_layout_key(key, keysym, keyboard)
                return PortalKey(key, keysym)
            found = keymap.key_with(keysym) if shortcut else None
            if found is None:
                raise ActionError(
                    f"the key {key!r} is not on the desktop's keyboard layout ({', '.join(missing)}), "
                    "so the desktop would ignore it"
                )
            keycode, layout = found
            return PortalKey(key, keysym, keycode - EVDEV_KEYCODE_OFFSET, layout + 1)

        return [resolve(key) for key in hold], [resolve(key) for key in taps]

    def _keyboard(self) -> Keyboard:
        """The desktop's keymap now and, on KDE, which of its layouts is active."""
        keymap = self._layout()
        return kde_keyboard(keymap, self._active_layout) if self._kde else Keyboard(keymap)

    def _text_keys(self, text: str) -> tuple[list[CharacterKeys], list[str], Keyboard]:
        """How each character of `text` is typed on the desktop's keyboard, and those it cannot type exactly."""
        unicode_keysyms = text_keysyms(text)  # ActionError for control characters
        keyboard = self._keyboard()
        keys: list[CharacterKeys] = []
        missing: list[str] = []
        for character, unicode_keysym in zip(text, unicode_keysyms, strict=True):
            found = keyboard.keys(character, unicode_keysym)
            if found is None:
                if character not in missing:
                    missing.append(character)
            else:
                keys.append(found)
        return keys, missing, keyboard

    def _text_route(self, text: str) -> TextRoute:
        """Typed when the keyboard types every character exactly; else pasted (the clipboard must work)."""
        _, missing, keyboard = self._text_keys(text)
        if not missing:
            return TYPED
        why = keyboard.missing_words(missing)
        try:
            self._resolve_clipboard()
            self._combo_keys(PASTE_KEYS[:-1], PASTE_KEYS[-1:])
        except (ClipboardError, ActionError) as exc:
            raise ActionError(
                f"{why}, and pasting it is not possible either: {exc}. "
                f"{keyboard.remedy} that has them, or make the clipboard work"
            ) from exc
        return TextRoute(False, why)

    def _resolve_clipboard(self) -> Clipboard:
        if self._clipboard is None:
            self._clipboard = wayland_clipboard()
        return self._clipboard

    # -- performing ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def acting(self, action: Action, steps: tuple[Primitive, ...]) -> Iterator[None]:
        """The session started with remote interaction allowed, its devices awake; refusals become DesktopRefused."""
        portal, monitors = self._started()
        if not portal.pointer_allowed or not portal.keyboard_allowed:
            raise ExecutionError(
                "the desktop shares the screen but did not allow remote interaction: "
                "turn on 'Allow Remote Interaction' in its dialog and start again"
            )
        self._portal, self._streams = portal, monitors
        self.session.note_input_began()
        try:
            self._warm_up(portal, monitors)
            yield
        except PortalError as exc:
            raise DesktopRefused(str(exc)) from exc
        except ClipboardError as exc:
            raise DesktopRefused(f"the clipboard: {exc}") from exc
        finally:
            self.session.note_input()

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

    def perform(self, step: Primitive, cancel: CancelToken) -> str:
        portal = self._portal
        assert portal is not None, "perform runs inside acting"
        if isinstance(step, PointerTo):
            self._move(portal, step.at)
        elif isinstance(step, ButtonClicks):
            for index in range(step.count):
                if index and cancel.sleep(self.multi_click_interval_s):
                    cancel.raise_if_cancelled()
                self._click(portal, step.button)
        elif isinstance(step, ButtonDrag):
            self._drag(step, portal, cancel)
        elif isinstance(step, WheelScroll):
            vertical = step.direction in (ScrollDirection.UP, ScrollDirection.DOWN)
            notch = -1 if step.direction in (ScrollDirection.UP, ScrollDirection.LEFT) else 1
            for index in range(step.notches):
                if index and cancel.sleep(self.scroll_notch_interval_s):
                    cancel.raise_if_cancelled()
                portal.pointer_axis_discrete(AXIS_VERTICAL if vertical else AXIS_HORIZONTAL, notch)
            # A window may hold the last notch until the pointer's next event (the conformance runs saw
            # it arrive with the next motion, at the next point): a motion where the pointer already
            # is ends the scroll there, then a bounded settle before anything else moves.
            if self._pointer_at is not None:
                self._move(portal, self._pointer_at)
            time.sleep(self.scroll_settle_s)
        elif isinstance(step, KeyPresses):
            return self._press(step, portal, cancel)
        elif isinstance(step, TypedText):
            return self._type(step.text, portal, cancel)
        elif isinstance(step, PastedText):
            return self._paste(step, portal, cancel)
        elif isinstance(step, Pause):
            raise AssertionError("the performer waits itself")
        return ""

    def _move(self, portal: PortalSession, point: Point) -> None:
        monitor = monitor_at(point, [entry.monitor for entry in self._streams])
        entry = next(item for item in self._streams if item.monitor == monitor)
        scale = monitor.scale
        # The pixel's own corner, in the stream's logical pixels: Qt and GTK round positions, so the
        # pixel's centre (x + 0.5) would land on the next pixel.
        x = (point.x - monitor.rect.left) / scale
        y = (point.y - monitor.rect.top) / scale
        portal.pointer_motion_absolute(entry.stream, x, y)
        self._pointer_at = point

    def _click(self, portal: PortalSession, button: MouseButton) -> None:
        code = EVDEV_BUTTONS[MouseButton(button)]
        portal.pointer_button(code, True)
        portal.pointer_button(code, False)

    def _drag(self, step: ButtonDrag, portal: PortalSession, cancel: CancelToken) -> None:
        code = EVDEV_BUTTONS[MouseButton(step.button)]
        portal.pointer_button(code, True)
        try:
            for point in drag_path(step.start, step.end, self.drag_step_px):
                if cancel.sleep(self.drag_step_interval_s):
                    cancel.raise_if_cancelled()
                self._move(portal, point)
        finally:
            portal.pointer_button(code, False)

    def _press(self, step: KeyPresses, portal: PortalSession, cancel: CancelToken) -> str:
        log.info("sent %s", self._send_keys(step, portal, cancel))
        return ""

    def _send_keys(self, step: KeyPresses, portal: PortalSession, cancel: CancelToken) -> str:
        """Hold `hold` down, press and release each tap in order, release `hold` in reverse (also on a stop).

        Returns the keys as sent, in words."""
        held, taps = self._combo_keys(step.hold, step.taps)
        pressed: list[PortalKey] = []
        with self._injected.holding(normalize_key(key) for key in step.keys):
            try:
                for key in held:
                    cancel.raise_if_cancelled()
                    key.send(portal, True)
                    pressed.append(key)
                for index, key in enumerate(taps):
                    if index and cancel.sleep(self.key_interval_s):
                        cancel.raise_if_cancelled()
                    cancel.raise_if_cancelled()
                    key.send(portal, True)
                    key.send(portal, False)
            finally:
                for key in reversed(pressed):
                    # If the session is gone the compositor releases its devices' keys itself.
                    with contextlib.suppress(PortalError):
                        key.send(portal, False)
        return _combination_words(held, taps)

    def _type(self, text: str, portal: PortalSession, cancel: CancelToken) -> str:
        """Each character on the keys every layout gives it on (its level's modifier, then its key),
        by keycode; by keysym where the layouts differ, so that mutter picks the active one's key.
        On KDE by keycode on the active layout's keys, and a layout switch while typing is said."""
        keys, missing, keyboard = self._text_keys(text)
        if missing:  # the layout changed since the check: the clipboard still carries the text
            return self._paste(PastedText(text, PASTE_KEYS, self._text_route(text).reason), portal, cancel)
        by_keysym = 0
        for character_keys in keys:
            cancel.raise_if_cancelled()
            with self._injected.holding(keys_for_text(character_keys.character)):
                if character_keys.evdev_keys is None:
                    by_keysym += 1
                    portal.keyboard_keysym(character_keys.keysym, True)
                    portal.keyboard_keysym(character_keys.keysym, False)
                else:
                    _hold_and_release(portal, character_keys.evdev_keys)
            if self.key_interval_s:
                time.sleep(self.key_interval_s)
        if keyboard.active is not None and len(keyboard.keymap.layout_names) > 1:
            self._check_layout_kept(keyboard, keyboard.active)
        if by_keysym == len(text):
            log.info("typed by keysym")
        elif not by_keysym:
            log.info("typed by keycode")
        else:
            log.info(
                "typed by keycode, %d of the characters by keysym (the layouts have them on different keys)", by_keysym
            )
        return ""

    def _check_layout_kept(self, keyboard: Keyboard, typed_in: int) -> None:
        """ExecutionError when KWin's active layout is not the one the text was typed in: the keys then
        gave the other layout's characters (a user's or a window's switch while typing)."""
        try:
            now = self._active_layout().index
        except LayoutUnknown as exc:
            raise ExecutionError(
                f"the text was typed in the keyboard layout {keyboard.keymap.layout_names[typed_in]}, but KWin "
                f"then did not say whether that layout was still active ({exc}): check the text"
            ) from exc
        if now != typed_in:
            names = keyboard.keymap.layout_names
            raise ExecutionError(
                f"the keyboard layout switched from {names[typed_in]} to {names[now]} while the text was typed, "
                "so part of it may have arrived as the other layout's characters: check the text"
            )

    def _check_paste(self, step: PastedText) -> None:
        """The paste keys can be pressed, a clipboard works, and XWayland's CLIPBOARD can carry the text."""
        self._combo_keys(step.keys[:-1], step.keys[-1:])
        if self._resolve_clipboard() is XCLIP:
            check_offer_size(step.text)

    def _paste(self, step: PastedText, portal: PortalSession, cancel: CancelToken) -> str:
        clipboard = self._resolve_clipboard()
        reason = f": {step.reason}" if step.reason else ""
        sent: list[str] = []  # the paste key as sent, in words, once pressed

        def press() -> None:
            sent.append(self._send_keys(KeyPresses(step.keys[:-1], step.keys[-1:]), portal, cancel))

        if clipboard is XCLIP:
            try:
                # mutter (GNOME) reads a copy of each new clipboard text before a paste can see it.
                # KWin's bridge is not verified here (no KDE paste runs: its capture sends no frame),
                # so there the formats alone are waited for, as before.
                taken = paste_with_own_selection(
                    step.text,
                    press,
                    host=SelectionHost.XWAYLAND,
                    compositor_copies=not self._kde,
                    timeout_s=self.paste_timeout_s,
                )
            except PasteNotTaken as exc:
                raise PasteNotTaken(f"{exc}; {_paste_key_left_as_a_key(sent[0])}") from exc
            return f"pasted through the clipboard with {sent[0]}{reason}; {taken}"
        previous = clipboard.read_text()
        clipboard.write_text(step.text)
        try:
            cancel.raise_if_cancelled()
            press()
            # Nothing tells when the target fetched the text; restoring sooner would paste the old
            # content. Not cancellable.
            time.sleep(self.paste_settle_s)
        finally:
            # Restore what the user had; with no text there (empty, an image), leave nothing behind.
            clipboard.write_text(previous if previous is not None else "")
        return (
            f"pasted through the clipboard with {sent[0]}{reason}; {clipboard.name} cannot tell when the program "
            f"took the text, so the previous content was put back after a fixed {self.paste_settle_s:g} s"
        )


def _active_layout_key(key: str, keysym: int, keyboard: Keyboard) -> PortalKey:
    """On KDE, a key that the active layout has elsewhere than the first (where KDE's portal looks a
    keysym up): pressed by keycode on the active layout's key; ActionError where that needs a modifier
    or KWin did not say which layout is active."""
    names = keyboard.keymap.layout_names
    if keyboard.active is None:
        why = f"KWin did not say which keyboard layout is active ({keyboard.unknown_why})"
    else:
        keys = keyboard.keymap.keys_in(keyboard.active, keysym)
        if keys is not None and len(keys) == 1:
            return PortalKey(key, keysym, keys[0] - EVDEV_KEYCODE_OFFSET, keyboard.active + 1)
        why = f"the active layout ({names[keyboard.active]}) gives it only with a modifier"
    raise ActionError(
        f"the key {key!r} is on different keys in the layouts ({', '.join(names)}) and {why}; KDE's portal "
        "would press the first layout's key, which gives another character: type it as text instead"
    )


def _hold_and_release(portal: PortalSession, evdev_keys: Sequence[int]) -> None:
    """Press the keys in order, release them in reverse, also when a press fails."""
    pressed: list[int] = []
    try:
        for key in evdev_keys:
            portal.keyboard_keycode(key, True)
            pressed.append(key)
    finally:
        for key in reversed(pressed):
            with contextlib.suppress(PortalError):  # a closed session releases its keys itself
                portal.keyboard_keycode(key, False)


def _paste_key_left_as_a_key(sent: str) -> str:
    """What a paste key nobody took may have left behind, in words: this backend cannot see the focus."""
    return (
        f"the paste key ({sent}) reached the focused program as a plain key: a terminal takes it as "
        "'insert the next key as it is' (bash's quoted-insert), so there a typed character arrives unchanged, "
        "but Enter, Tab, Backspace or an arrow sent next is inserted as a control character instead of acting "
        "(typing a character and deleting it with Backspace ends that state)"
    )


def _combination_words(held: Sequence[PortalKey], taps: Sequence[PortalKey]) -> str:
    """The keys as sent: "ctrl+v (the key that has v in layout 1)", "backspace by keysym, 3 times"."""
    repeated = len(taps) > 1 and len({key.name for key in taps}) == 1
    shown = [*held, taps[0]] if repeated or len(taps) == 1 else [*held, *taps]
    combo = "+".join(key.words for key in shown)
    how = " by keysym" if all(key.evdev_code is None for key in shown) else ""
    times = f", {len(taps)} times" if repeated else ""
    return f"{combo}{how}{times}"
