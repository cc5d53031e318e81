"""The GlobalShortcuts client against the real xdg-desktop-portal 1.16 frontend on the headless GNOME stack.

The portal is routed to tests/support/shortcuts_backend.py (no backend here implements the
interface); it binds, refuses and reports as KDE's backend and the interface's documentation do.
A second stack, without that backend, is the portal of GNOME 43: no GlobalShortcuts at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from bench.rigs.gnome_stack import StackError
from holodesk.app.cli.doctor_desktop import check_hotkeys
from holodesk.app.cli.doctor_report import Status
from holodesk.app.common.hotkey_path import HotkeyPath, plan_hotkeys
from holodesk.automation.wayland.portal import ConsentRefused, PortalError
from holodesk.automation.wayland.shortcuts import (
    NO_INTERFACE_WORDS,
    GlobalShortcutsSession,
    ShortcutRequest,
    ShortcutsUnavailable,
    preferred_trigger,
    probe_global_shortcuts,
)
from tests.support.shortcuts_portal import ShortcutsStack

pytestmark = pytest.mark.display  # every test here starts a display or a desktop stack

PROMPT = ShortcutRequest("prompt", "Open the task prompt", "CTRL+ALT+h")
STOP = ShortcutRequest("stop", "Stop the running task")


@pytest.fixture(scope="module")
def desktop() -> Iterator[ShortcutsStack]:
    stack = ShortcutsStack()
    try:
        stack.start()
    except StackError as exc:
        pytest.fail(f"the headless GNOME stack did not start: {exc}", pytrace=False)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture
def presses() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def open_session(
    desktop: ShortcutsStack, presses: list[tuple[str, str]]
) -> Iterator[Callable[..., GlobalShortcutsSession]]:
    opened: list[GlobalShortcutsSession] = []

    def open_(*shortcuts: ShortcutRequest) -> GlobalShortcutsSession:
        session = GlobalShortcutsSession.open(
            shortcuts or (PROMPT, STOP),
            lambda shortcut_id: presses.append((shortcut_id, threading.current_thread().name)),
            bus_address=desktop.bus_address,
        )
        opened.append(session)
        return session

    yield open_
    for session in opened:
        session.close()


def wait_for(condition: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_binding_returns_what_the_desktop_bound(open_session: Callable[..., GlobalShortcutsSession]) -> None:
    session = open_session()

    assert [(s.id, s.description, s.trigger) for s in session.bound] == [
        ("prompt", "Open the task prompt", "Ctrl+Alt+H"),
        ("stop", "Stop the running task", ""),  # no preferred keys: the desktop assigned none
    ]
    assert session.unbound(["prompt", "stop"]) == ["stop"]
    assert session.list_shortcuts() == session.bound


def test_a_press_reaches_the_callback_on_the_sessions_thread(
    desktop: ShortcutsStack, open_session: Callable[..., GlobalShortcutsSession], presses: list[tuple[str, str]]
) -> None:
    session = open_session()

    assert desktop.press("CTRL+ALT+h") == 1
    assert wait_for(lambda: len(presses) == 1), presses
    assert presses == [("prompt", "holodesk-shortcuts")]
    assert desktop.assign("stop", "CTRL+ALT+period") == 1  # the user sets keys in the desktop's settings
    assert [s.trigger for s in session.list_shortcuts() if s.id == "stop"] == ["Ctrl+Alt+period"]
    assert desktop.press("CTRL+ALT+period") == 1
    assert wait_for(lambda: len(presses) == 2), presses
    assert presses[1][0] == "stop"


def test_another_sessions_presses_are_not_ours(
    desktop: ShortcutsStack, open_session: Callable[..., GlobalShortcutsSession], presses: list[tuple[str, str]]
) -> None:
    first = open_session(ShortcutRequest("mine", "Mine", "CTRL+ALT+m"))
    second = open_session(ShortcutRequest("theirs", "Theirs", "CTRL+ALT+m"))

    assert second.unbound(["theirs"]) == ["theirs"]  # the keys were taken: the desktop gave none
    assert first.unbound(["mine"]) == []
    desktop.assign("theirs", "CTRL+ALT+t")
    assert desktop.press("CTRL+ALT+t") == 1  # portal 1.16 broadcasts it to every client
    assert desktop.press("CTRL+ALT+m") == 1
    assert wait_for(lambda: len(presses) == 2)
    time.sleep(0.2)
    # Both sessions report into one list: each heard its own press only.
    assert sorted(shortcut for shortcut, _ in presses) == ["mine", "theirs"]


def test_close_ends_the_session_on_the_desktop(
    desktop: ShortcutsStack, open_session: Callable[..., GlobalShortcutsSession], presses: list[tuple[str, str]]
) -> None:
    session = open_session()
    assert session.session_handle in desktop.sessions()

    session.close()
    session.close()  # twice is fine

    assert wait_for(lambda: session.session_handle not in desktop.sessions())
    assert desktop.press("CTRL+ALT+h") == 0
    with pytest.raises(PortalError, match="closed"):
        session.list_shortcuts()


def test_a_refused_dialog_is_said_in_words_and_leaves_no_session(
    desktop: ShortcutsStack, open_session: Callable[..., GlobalShortcutsSession]
) -> None:
    before = set(desktop.sessions())
    desktop.set_mode("refuse")
    try:
        with pytest.raises(ConsentRefused, match="you declined the desktop's request to bind Holodesk's shortcuts"):
            open_session()
    finally:
        desktop.set_mode("bind")
    # The connection closed with the failure: the portal closed the session it had created.
    assert wait_for(lambda: set(desktop.sessions()) == before), desktop.sessions()


def test_bad_requests_change_nothing(open_session: Callable[..., GlobalShortcutsSession]) -> None:
    with pytest.raises(ValueError, match="unique"):
        open_session(PROMPT, PROMPT)


def test_the_portal_version_and_the_plan(desktop: ShortcutsStack, monkeypatch: pytest.MonkeyPatch) -> None:
    assert probe_global_shortcuts(desktop.bus_address) == 1
    for key, value in desktop.env().items():
        monkeypatch.setenv(key, value)
    plan = plan_hotkeys()
    assert plan.path is HotkeyPath.PORTAL
    result = check_hotkeys()
    assert result.status is Status.OK
    assert "GlobalShortcuts (version 1)" in result.detail


def test_a_portal_without_global_shortcuts_is_said_in_words(monkeypatch: pytest.MonkeyPatch) -> None:
    with ShortcutsStack(global_shortcuts=False) as stack:
        with pytest.raises(ShortcutsUnavailable) as raised:
            probe_global_shortcuts(stack.bus_address)
        assert str(raised.value) == NO_INTERFACE_WORDS
        with pytest.raises(ShortcutsUnavailable, match="no GlobalShortcuts interface"):
            GlobalShortcutsSession.open([PROMPT], print, bus_address=stack.bus_address)
        for key, value in stack.env().items():
            monkeypatch.setenv(key, value)
        monkeypatch.delenv("DISPLAY", raising=False)
        result = check_hotkeys()
    assert result.status is Status.INFO
    assert "no GlobalShortcuts interface" in result.detail
    assert "`holodesk trigger`" in result.fix and "`holodesk trigger stop`" in result.fix


def test_an_unreachable_bus_is_said_in_words(tmp_path) -> None:
    with pytest.raises(ShortcutsUnavailable, match="cannot connect to the D-Bus session bus"):
        probe_global_shortcuts(f"unix:path={tmp_path / 'no-bus'}")


@pytest.mark.parametrize(
    ("hotkey", "trigger"),
    [
        ("<ctrl>+<alt>+h", "CTRL+ALT+h"),
        ("<cmd>+<shift>+<f5>", "LOGO+SHIFT+F5"),
        ("<ctrl_l>+<esc>", "CTRL+Escape"),
        ("<pause>", "Pause"),
        ("<ctrl>+<menu>", None),  # no such key name here: the desktop picks
        ("<hyper>+h", None),
        ("", None),
    ],
)
def test_preferred_trigger_in_the_shortcuts_syntax(hotkey: str, trigger: str | None) -> None:
    assert preferred_trigger(hotkey) == trigger
