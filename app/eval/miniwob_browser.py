"""One real Chromium window showing MiniWoB++ tasks, for evaluations on the current X display.

Chromium is driven through chromedriver (selenium) for the bookkeeping only: opening a task page,
starting an episode with a seed, reading its instruction, its reward and the DOM. Every action on
the page goes through the desktop (the step engine's action performer), as it would for the user.

Choices, from what was seen to work with Debian 12's Chromium under Xvfb, as root, on 2 cores:
- Debian's `chromium` and `chromium-driver`; `--no-sandbox` (root in CI), no first-run UI, and no
  `--enable-automation` switch (its info bar would shift the page).
- The 160x210 task is enlarged with `--force-device-scale-factor`, not CSS zoom (which breaks
  jQuery-UI positions).
- A private TMPDIR and profile folder, removed on close (each launch leaves folders otherwise).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from holodesk.app.common.errors import HolodeskAppError
from holodesk.app.common.install_advice import install_extra
from holodesk.app.eval.desktop_parts import Part, children

# The MiniWoB task area in CSS pixels (miniwob.constants.TASK_WIDTH/HEIGHT) and the window around
# it: the instruction and the reward panel to its right are part of the page.
TASK_WIDTH_CSS = 160
TASK_HEIGHT_CSS = 210
WINDOW_WIDTH_CSS = 340
WINDOW_HEIGHT_CSS = 240
CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER_CANDIDATES = ("chromedriver",)
MISSING_BROWSER = (
    "MiniWoB++ needs Chromium and its driver: install Debian's `chromium` and `chromium-driver` "
    "(apt-get install chromium chromium-driver), or name them with --chromium and --chromedriver."
)
MISSING_MINIWOB = f"MiniWoB++ is not installed: install Holodesk's eval extra, {install_extra('eval')}"
PAGE_LOAD_TIMEOUT_S = 15.0
READY_TIMEOUT_S = 2.0

# Screen boxes of elements, in CSS pixels of the viewport, plus the window geometry needed to place
# them on the screen. Runs in the page; `arguments[0]` is a list of elements.
_BOXES_JS = """
var out = [];
for (var i = 0; i < arguments[0].length; i++) {
  var e = arguments[0][i];
  var r = e.getBoundingClientRect();
  out.push({left: r.left, top: r.top, width: r.width, height: r.height,
            text: (e.innerText || e.value || '').replace(/\\s+/g, ' ').trim(), tag: e.tagName.toLowerCase()});
}
return {boxes: out, screenX: window.screenX, screenY: window.screenY, outerWidth: window.outerWidth,
        outerHeight: window.outerHeight, innerWidth: window.innerWidth, innerHeight: window.innerHeight,
        dpr: window.devicePixelRatio};
"""


class BrowserError(HolodeskAppError):
    """Chromium, chromedriver or a MiniWoB page could not be used; the message says which and why."""


SCRATCH_PREFIX = "hd-chromium-"  # short: Chromium's sockets go under the scratch folder
# Chromium's singleton socket is SCRATCH/.org.chromium.Chromium.XXXXXX/SingletonSocket (recent versions
# drop the dot: counted with it, the check is one byte safe), and a Unix socket's path holds 107 bytes.
SOCKET_TAIL_BYTES = len("/.org.chromium.Chromium.XXXXXX/SingletonSocket")
SOCKET_PATH_MAX = 107
TEMP_NAME_CHARS = 8  # the random part of tempfile.mkdtemp's names


def socket_room_problem(temp_folder: str) -> str | None:
    """Words when Chromium's socket, under a scratch folder made in `temp_folder`, would not fit; else None.

    Past the limit Chromium exits at start and chromedriver says only "Chrome instance exited".
    """
    longest = len(os.fsencode(temp_folder)) + 1 + len(SCRATCH_PREFIX) + TEMP_NAME_CHARS + SOCKET_TAIL_BYTES
    if longest <= SOCKET_PATH_MAX:
        return None
    excess = longest - SOCKET_PATH_MAX
    return (
        f"Chromium cannot start under the temp folder {temp_folder}: its socket's path would be {longest} "
        f"bytes, over the {SOCKET_PATH_MAX} a socket's path can hold. Set TMPDIR to a folder "
        f"{excess} character{'' if excess == 1 else 's'} shorter (/tmp is fine)"
    )


@dataclass(frozen=True, slots=True)
class EpisodeState:
    """Where an episode stands: `reward` is the task's own (time-scaled), `raw_reward` without scaling."""

    done: bool
    reward: float
    raw_reward: float
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class ScreenBox:
    """A page element's box in physical screen pixels, with its visible text and tag name."""

    left: float
    top: float
    width: float
    height: float
    text: str
    tag: str

    @property
    def center(self) -> tuple[int, int]:
        return round(self.left + self.width / 2), round(self.top + self.height / 2)

    @property
    def visible(self) -> bool:
        return self.width > 0 and self.height > 0


def find_executable(given: str | None, candidates: tuple[str, ...]) -> str:
    """`given` (a path or a name on PATH), else the first of `candidates` on PATH."""
    for name in (given,) if given else candidates:
        path = shutil.which(name)
        if path:
            return path
    raise BrowserError(MISSING_BROWSER)


def miniwob_html_dir() -> Path:
    """The task pages shipped inside the `miniwob` package."""
    try:
        import miniwob
    except ImportError:
        raise BrowserError(MISSING_MINIWOB) from None
    folder = Path(miniwob.__file__).resolve().parent / "html" / "miniwob"
    if not folder.is_dir():
        raise BrowserError(f"the miniwob package has no task pages at {folder}")
    return folder


def task_names() -> list[str]:
    """Every MiniWoB++ task this install can open (flight.* tasks need miniwob's own server: left out)."""
    return sorted(path.stem for path in miniwob_html_dir().glob("*.html"))


class MiniWoBBrowser:
    """A Chromium window at `origin` (screen pixels) showing one MiniWoB task at a time, `zoom` times enlarged.

    `display` names the X display Chromium opens on (default: this process's $DISPLAY); a parallel
    eval worker passes its own desktop's.
    """

    def __init__(
        self,
        *,
        zoom: float = 3.0,
        origin: tuple[int, int] = (0, 0),
        chromium: str | None = None,
        chromedriver: str | None = None,
        display: str | None = None,
    ) -> None:
        if not 0.5 <= zoom <= 8:
            raise ValueError(f"zoom must be between 0.5 and 8, got {zoom:g}")
        self.zoom = zoom
        self.origin = origin
        self.task: str | None = None
        self._html = miniwob_html_dir()
        chromium_path = find_executable(chromium, CHROMIUM_CANDIDATES)
        driver_path = find_executable(chromedriver, CHROMEDRIVER_CANDIDATES)
        try:
            from selenium import webdriver
            from selenium.webdriver.chrome.service import Service
        except ImportError:
            raise BrowserError(MISSING_MINIWOB) from None
        if (problem := socket_room_problem(tempfile.gettempdir())) is not None:
            raise BrowserError(problem)
        self._scratch = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        options = webdriver.ChromeOptions()
        options.binary_location = chromium_path
        for argument in (
            "--no-sandbox",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-dev-shm-usage",
            "--disable-extensions",
            "--disable-infobars",
            "--disable-features=Translate,MediaRouter",
            "--password-store=basic",
            f"--user-data-dir={self._scratch / 'profile'}",
            f"--force-device-scale-factor={zoom:g}",
            f"--window-position={origin[0]},{origin[1]}",
            f"--window-size={round(WINDOW_WIDTH_CSS * zoom)},{round(WINDOW_HEIGHT_CSS * zoom)}",
            f"--app={self._task_url('click-test')}",
        ):
            options.add_argument(argument)
        options.add_experimental_option("excludeSwitches", ["enable-automation"])
        environment = {**os.environ, "TMPDIR": str(self._scratch)}
        if display is not None:
            environment["DISPLAY"] = display
            environment.pop("WAYLAND_DISPLAY", None)
        try:
            self._driver: Any = webdriver.Chrome(
                service=Service(executable_path=driver_path, env=environment), options=options
            )
        except Exception as exc:  # selenium raises its own WebDriverException subclasses and OSErrors
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise BrowserError(f"Chromium did not start through {driver_path}: {_first_line(exc)}") from exc
        self._driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
        self._driver.set_script_timeout(5)

    def parts(self) -> list[Part]:
        """chromedriver and the Chromium it started, for a parallel worker to watch (app/eval/desktop_parts.py)."""
        driver = self._driver.service.process
        found = [Part("chromedriver", driver.pid, driver)]
        # Chromium's browser process is chromedriver's child (the wrapper script execs it in place).
        found += [Part("Chromium", pid) for pid, name in children(driver.pid) if "chrom" in name.lower()]
        return found

    def _task_url(self, task: str) -> str:
        return (self._html / f"{task}.html").as_uri()

    def open_task(self, task: str) -> None:
        """Load `task`'s page (an unknown name is a BrowserError, listing where tasks come from)."""
        if not (self._html / f"{task}.html").is_file():
            raise BrowserError(f"there is no MiniWoB task {task!r} (see `holodesk eval miniwob --list`)")
        try:
            self._driver.get(self._task_url(task))
        except Exception as exc:  # selenium's WebDriverException kinds and OSErrors: no common base
            raise BrowserError(f"the page of {task} did not load: {_first_line(exc)}") from exc
        self._wait_for("return typeof core !== 'undefined' && document.getElementById('sync-task-cover') !== null;")
        self.task = task

    def start_episode(self, seed: int, time_limit_s: float) -> str:
        """Start a fresh episode of the open task with `seed`; returns its instruction."""
        if self.task is None:
            raise BrowserError("no task is open")
        if time_limit_s <= 0:
            raise ValueError("the episode time limit must be positive")
        self.run_js(
            "core.EPISODE_MAX_TIME = arguments[1];"
            "if (WOB_DONE_GLOBAL === false) { core.endEpisode(0); }"
            "Math.seedrandom(arguments[0]); core.setDataMode('train'); core.startEpisodeReal();"
            "document.activeElement && document.activeElement.blur && document.activeElement.blur();",
            str(seed),
            round(time_limit_s * 1000),
        )
        self._wait_for("return WOB_TASK_READY === true;")
        self._wait_for_paint()
        return str(self.run_js("return core.getUtterance();"))

    def _wait_for_paint(self) -> None:
        """Return once the page has drawn its current content: a frame has begun after the one that
        holds it (two animation frames). The first screenshot of an episode is taken right after
        this; on a loaded machine a routine recorded from such a screenshot once matched nothing on
        replay, as a picture of the screen before the new episode was drawn would."""
        try:
            self._driver.execute_async_script(
                "var done = arguments[arguments.length - 1];"
                "requestAnimationFrame(function () { requestAnimationFrame(function () { done(true); }); });"
            )
        except Exception as exc:  # selenium's timeout and driver errors alike
            raise BrowserError(f"the page of {self.task or 'the task'} did not draw within 5 s: {exc}") from exc

    def end_episode(self) -> None:
        """End a running episode without a reward (its timer would otherwise fire during the next)."""
        self.run_js("if (WOB_DONE_GLOBAL === false) { core.endEpisode(0); }")

    def state(self) -> EpisodeState:
        values = self.run_js("return [WOB_DONE_GLOBAL, WOB_REWARD_GLOBAL, WOB_RAW_REWARD_GLOBAL, WOB_REWARD_REASON];")
        done, reward, raw, reason = values
        return EpisodeState(bool(done), float(reward or 0), float(raw or 0), None if reason is None else str(reason))

    def run_js(self, script: str, *args: Any) -> Any:
        """Run `script` in the page (selenium's execute_script); a failure is a BrowserError."""
        try:
            return self._driver.execute_script(script, *args)
        except Exception as exc:  # selenium's WebDriverException kinds and OSErrors: no common base
            raise BrowserError(f"the page script failed: {_first_line(exc)}") from exc

    def boxes(self, selector_js: str, *args: Any) -> list[ScreenBox]:
        """Screen boxes of the elements `selector_js` returns (a script returning a list of elements)."""
        elements = self.run_js(selector_js, *args) or []
        found = self.run_js(_BOXES_JS, list(elements))
        return [self._to_screen(box, found) for box in found["boxes"]]

    def box(self, selector_js: str, *args: Any) -> ScreenBox | None:
        """The first visible box of `selector_js`'s elements, or None."""
        return next((box for box in self.boxes(selector_js, *args) if box.visible), None)

    @staticmethod
    def _to_screen(box: dict[str, Any], window: dict[str, Any]) -> ScreenBox:
        # screenX/outer/inner sizes are in CSS pixels; the page sits at the bottom of the window's
        # frame, centred horizontally (seen exact against screenshots and page events).
        dpr = float(window["dpr"])
        frame_x = (window["outerWidth"] - window["innerWidth"]) / 2
        frame_y = window["outerHeight"] - window["innerHeight"]
        left = (window["screenX"] + frame_x + box["left"]) * dpr
        top = (window["screenY"] + frame_y + box["top"]) * dpr
        return ScreenBox(left, top, box["width"] * dpr, box["height"] * dpr, str(box["text"]), str(box["tag"]))

    def _wait_for(self, condition_js: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not self.run_js(condition_js):
            if time.monotonic() > deadline:
                raise BrowserError(f"the page of {self.task or 'the task'} did not get ready within {timeout_s:g} s")
            time.sleep(0.02)

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing must not fail: the browser may already be gone
            self._driver.quit()
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> MiniWoBBrowser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "msg", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
