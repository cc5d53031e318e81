"""Qt's platform choice on a Wayland session: XWayland when its X display answers, words when it does not."""

from __future__ import annotations

import os

import pytest

from holodesk.app.gui.qt_platform import NO_XWAYLAND, apply_qt_platform, choose_qt_platform


@pytest.mark.display
def test_a_wayland_session_with_a_live_x_display_runs_qt_on_xcb(xvfb):
    env = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": os.environ["DISPLAY"]}
    choice = apply_qt_platform(env)
    assert choice.platform == "xcb" and env["QT_QPA_PLATFORM"] == "xcb"
    assert choice.blocker is None and os.environ["DISPLAY"] in choice.reason


def test_without_an_answering_x_display_the_gui_says_it_needs_xwayland(tmp_path):
    for env, shown in (
        ({"WAYLAND_DISPLAY": "wayland-0"}, "unset"),
        ({"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":987"}, ":987, which does not answer"),
    ):
        choice = apply_qt_platform(env)
        assert choice.platform is None and "QT_QPA_PLATFORM" not in env
        assert choice.blocker == NO_XWAYLAND.format(display=shown)
        assert "holodesk run" in choice.blocker


def test_the_users_own_platform_wins_and_native_wayland_is_warned_about():
    env = {"WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":987", "QT_QPA_PLATFORM": "wayland"}
    choice = apply_qt_platform(env)
    assert env["QT_QPA_PLATFORM"] == "wayland" and choice.blocker is None
    assert choice.warning is not None and "approval panel may fall behind" in choice.warning
    assert choice_for_x11_session().platform is None


def choice_for_x11_session():
    return choose_qt_platform({"DISPLAY": ":987"}, display_answers=lambda _display: True)
