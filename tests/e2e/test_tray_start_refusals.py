"""`holodesk` (the tray app) refusing to start on a bad environment: a sentence on stderr and in a window."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.e2e.test_tray_app import wait_for_window, xdotool
from tests.support.holodesk_command import HOLODESK_COMMAND


@pytest.mark.display
def test_a_bad_holodesk_backend_is_said_in_words_not_a_traceback(xvfb, tmp_path):
    env = {
        **os.environ,
        "HOLODESK_BACKEND": "bogus",
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "HOLODESK_INSTANCE_NAME": f"test-{os.getpid()}-{time.monotonic_ns()}",
        "QT_QPA_PLATFORM": "xcb",
    }
    process = subprocess.Popen([*HOLODESK_COMMAND], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Started from a menu nobody reads stderr: the same words show in a window, which the user closes.
        box = wait_for_window("Holodesk cannot start")
        xdotool("windowfocus", "--sync", box)
        xdotool("key", "Return")
        _out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 2, err
    assert "Traceback" not in err, err
    assert err.strip() == (
        "holodesk: HOLODESK_BACKEND must be 'x11', 'wayland' or 'wlroots', got 'bogus';"
        " unset it to let Holodesk choose."
    )
