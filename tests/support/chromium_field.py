"""A Chromium window showing a local page with a text field and a text area, read back through the DOM.

The page is a file written to a private folder; Chromium is Debian's, driven by chromedriver through
selenium only to read what the page holds (`value`) and how many times Enter was pressed in the
field (a keydown listener counts it). Every key reaches the page through the desktop: the X display
(Xvfb, or XWayland) the window is on, from the input backend under test. One window per test
module: starting Chromium takes seconds.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from holodesk.app.eval.miniwob_browser import CHROMEDRIVER_CANDIDATES, CHROMIUM_CANDIDATES, find_executable

PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>holodesk typing target</title>
<style>body { margin: 8px; font: 16px sans-serif } input, textarea { width: 640px; font: 16px monospace }</style>
</head><body>
<input id="line" autocomplete="off" spellcheck="false"><br>
<textarea id="area" rows="6" spellcheck="false"></textarea>
<script>
window.enters = 0;
window.keys = [];  // each keydown the page was given, for a failure report: [key, Shift down]
window.held = {};  // the keys down now, by code
document.getElementById("line").addEventListener("keydown", function (e) { if (e.key === "Enter") window.enters++; });
document.addEventListener("keydown", function (e) {
  if (!e.repeat) { window.keys.push([e.key, e.shiftKey]); window.held[e.code] = true; }
}, true);
document.addEventListener("keyup", function (e) { delete window.held[e.code]; }, true);
</script>
</body></html>
"""
FIELD = "line"  # one line: Enter is counted, not inserted
AREA = "area"  # several lines: Enter inserts a line break
# How long one chromedriver command may take. A page that does not answer a one-line script within
# this has stopped (seen once in CI under load, cause unknown): selenium's own 120 s, retried, held
# the run for minutes and said only "Read timed out".
PAGE_ANSWER_S = 30


class PageStoppedAnswering(AssertionError):
    """The page did not answer a script within PAGE_ANSWER_S; the message lists the display's windows."""


class ChromiumField:
    """The Chromium window at `origin` on the current X display (`DISPLAY`), showing PAGE."""

    def __init__(
        self, origin: tuple[int, int], size: tuple[int, int] = (760, 360), *, ozone_platform: str = "x11"
    ) -> None:
        """`ozone_platform` "wayland": a native Wayland window on `WAYLAND_DISPLAY` (the desktop focuses
        it; there is no X window to find or focus)."""
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium = find_executable(None, CHROMIUM_CANDIDATES)
        driver = find_executable(None, CHROMEDRIVER_CANDIDATES)
        self._scratch = Path(tempfile.mkdtemp(prefix="holodesk-chromium-field-"))
        page = self._scratch / "field.html"
        page.write_text(PAGE, encoding="utf-8")
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for argument in (
            "--no-sandbox",  # root in CI
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-features=Translate,MediaRouter",
            "--password-store=basic",
            f"--ozone-platform={ozone_platform}",  # x11: the X display the backend types on, also under XWayland
            f"--user-data-dir={self._scratch / 'profile'}",
            f"--window-position={origin[0]},{origin[1]}",
            f"--window-size={size[0]},{size[1]}",
            f"--app={page.as_uri()}",
        ):
            options.add_argument(argument)
        options.add_experimental_option("excludeSwitches", ["enable-automation"])
        environment = {**os.environ, "TMPDIR": str(self._scratch)}
        try:
            self._driver: Any = webdriver.Chrome(
                service=Service(executable_path=driver, env=environment), options=options
            )
        except Exception:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self._driver.set_script_timeout(5)
        self._driver.command_executor.client_config.timeout = PAGE_ANSWER_S
        self._stopped = False
        self.window_id = self._find_window() if ozone_platform == "x11" else 0

    def _find_window(self, timeout_s: float = 30.0) -> int:
        """The X window showing the page (its title is the page's).

        Searched again until found: xdotool exits with an error when a window it is looking at goes
        away meanwhile, as Chromium's windows do while it starts (seen under XWayland).
        """
        deadline = time.monotonic() + timeout_s
        while True:
            found = subprocess.run(
                ["xdotool", "search", "--onlyvisible", "--name", "holodesk typing target"],
                check=False,
                timeout=timeout_s,
                capture_output=True,
                text=True,
            )
            if found.returncode == 0 and found.stdout.split():
                return int(found.stdout.split()[-1])
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Chromium window did not show within {timeout_s:g} s: {found.stderr.strip()}")
            time.sleep(0.1)

    def focus(self, element: str) -> None:
        """Give the window the X keyboard focus, then `element` the page's focus, emptied."""
        if self.window_id:
            subprocess.run(["xdotool", "windowfocus", "--sync", str(self.window_id)], check=True, timeout=20)
        self._script(
            "var e = document.getElementById(arguments[0]); e.value = ''; e.focus();"
            " window.enters = 0; window.keys = [];",
            element,
        )
        deadline = time.monotonic() + 10
        while not self._script("return document.hasFocus();"):
            assert time.monotonic() < deadline, "the Chromium page did not get the keyboard focus"
            time.sleep(0.02)

    def _script(self, source: str, *arguments: object) -> Any:
        """`source` run in the page; PageStoppedAnswering when the page did not answer in time."""
        import urllib3

        if self._stopped:
            raise PageStoppedAnswering("the page stopped answering earlier in this test")
        try:
            return self._driver.execute_script(source, *arguments)
        except urllib3.exceptions.ReadTimeoutError as exc:
            self._stopped = True
            raise PageStoppedAnswering(
                f"the Chromium page did not answer a one-line script within {PAGE_ANSWER_S} s "
                f"(a hung renderer, or a modal dialog); the named windows on the display: "
                f"{display_windows()}"
            ) from exc

    def value(self, element: str) -> str:
        return str(self._script("return document.getElementById(arguments[0]).value;", element))

    def keys(self) -> list[tuple[str, bool]]:
        """Each keydown the page was given since the last `focus`: the key's value and whether Shift was down."""
        return [(str(key), bool(shift)) for key, shift in self._script("return window.keys;")]

    def focused_element(self) -> str:
        """The id of the page's focused element ('' for none or one without an id), for a failure report."""
        return str(self._script("var e = document.activeElement; return e && e.id ? e.id : '';"))

    def held(self) -> list[str]:
        """The keys (by code) the page saw go down and not yet up."""
        return [str(code) for code in self._script("return Object.keys(window.held);")]

    def enters(self) -> int:
        return int(self._script("return window.enters;"))

    def wait_for_value(self, element: str, expected: str, timeout_s: float = 15.0) -> str:
        """The element's value once it equals `expected`, or what it holds when `timeout_s` ran out."""
        deadline = time.monotonic() + timeout_s
        while (value := self.value(element)) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return value

    def wait_for_ending(self, element: str, end: str, timeout_s: float = 10.0) -> str | None:
        """The element's value once it ends with `end`; None if it did not within `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.value(element)
            if value.endswith(end):
                return value
            time.sleep(0.05)
        return None

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the browser may already be gone
            if self._stopped:  # quit would wait on the page again: end chromedriver, which ends Chromium
                self._driver.service.stop()
            else:
                self._driver.quit()
        shutil.rmtree(self._scratch, ignore_errors=True)


def display_windows(most: int = 12) -> str:
    """The names of the visible windows on the current X display, for a failure's words."""
    found = subprocess.run(
        ["xdotool", "search", "--onlyvisible", "--name", ""], check=False, timeout=10, capture_output=True, text=True
    )
    names = []
    for window in found.stdout.split()[:most]:
        name = subprocess.run(
            ["xdotool", "getwindowname", window], check=False, timeout=10, capture_output=True, text=True
        )
        if name.stdout.strip():
            names.append(repr(name.stdout.strip()))
    return ", ".join(names) or "none"
