"""A DOM-reading oracle for MiniWoB++ that answers like Holotron, for tests and benchmarks of the eval.

It is a TextGenerator backend: asked for the next step, it reads the instruction and the page's
DOM through the harness (MiniWoBBrowser), decides what a careful person would do next, and writes
the answer as the holotron profile's JSON step text, with x and y integers in [0, 1000] relative to
the image the model is shown. The profile parses that text exactly as it parses a model's, the engine
maps it to the screen, and the performer clicks and types through XTEST, so a wrong coordinate
convention, mapping or performer shows as a lost episode. The oracle itself never touches the page
except to read it.

Its coordinates share no code with the product: it reads each element's bounding box and the
window's metrics with its own script, places the box on the screen with its own arithmetic, and
expresses the centre as a fraction of the image's width and height. An error in the product's
mapping (either direction) therefore moves the click and loses the episode, instead of cancelling
out against the same error in the oracle.

Decisions are made from the page as it is now, so a step that did not land is simply tried again.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from holodesk.app.eval.miniwob_browser import MiniWoBBrowser
from holodesk.automation.coords import Rect
from holodesk.inference.errors import BackendError
from holodesk.inference.generation import Generation
from holodesk.inference.policy import StepTimings
from holodesk.inference.profiles.base import ChatRequest

# The holotron profile's convention, restated here on purpose (not imported): integers in [0, 1000]
# relative to the width and the height of the image the model is shown.
MODEL_SCALE = 1000

# Each element's bounding box (CSS pixels of the viewport) and the window metrics needed to place it
# on the screen. Runs in the page; `arguments[0]` is a list of elements.
_RECTS_JS = """
var rects = arguments[0].map(function (e) {
  var r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, width: r.width, height: r.height,
          text: (e.innerText || e.value || '').replace(/\\s+/g, ' ').trim(), tag: e.tagName.toLowerCase()};
});
return {rects: rects, screenX: window.screenX, screenY: window.screenY, outerWidth: window.outerWidth,
        outerHeight: window.outerHeight, innerWidth: window.innerWidth, innerHeight: window.innerHeight,
        dpr: window.devicePixelRatio};
"""

# The tasks the oracle can solve, one per kind of interaction the eval must get right.
ORACLE_TASKS = (
    "click-button",  # clicking a named button among others
    "click-link",  # clicking a word in running text
    "focus-text",  # clicking a text field
    "enter-text",  # typing into a field, then submitting
    "enter-password",  # typing into two password fields
    "login-user",  # a login form
    "click-checkboxes",  # several checkboxes
    "click-option",  # radio buttons
    "click-tab",  # jQuery-UI tabs
    "click-dialog",  # a dialog's close button
    "click-collapsible",  # an animated accordion, then submit
    "choose-list",  # a native <select>: its popup is a separate X window
    "scroll-text-2",  # scrolling a text area with the wheel
)


@dataclass(frozen=True, slots=True)
class _Target:
    """A page element as the oracle sees it: the centre of its box on the screen (physical pixels,
    continuous: pixel i covers [i, i+1)), its size there, its visible text and tag name."""

    x: float
    y: float
    width: float
    height: float
    text: str
    tag: str

    @property
    def visible(self) -> bool:
        return self.width > 0 and self.height > 0


@dataclass(frozen=True, slots=True)
class _Step:
    """The oracle's decision before it becomes text: a tool name and its arguments."""

    name: str
    at: _Target | None = None
    arguments: dict[str, Any] | None = None


def _elements(selector: str) -> str:
    return f"return Array.from(document.querySelectorAll({json.dumps(selector)}));"


def _on_screen(rect: dict[str, Any], window: dict[str, Any]) -> _Target:
    """Where a DOM box's centre is on the screen: the page sits at the bottom of the window's frame,
    centred horizontally, and CSS pixels times the device-pixel ratio are physical pixels."""
    dpr = float(window["dpr"])
    border = (float(window["outerWidth"]) - float(window["innerWidth"])) / 2
    title = float(window["outerHeight"]) - float(window["innerHeight"])
    cx = float(rect["left"]) + float(rect["width"]) / 2
    cy = float(rect["top"]) + float(rect["height"]) / 2
    return _Target(
        x=(float(window["screenX"]) + border + cx) * dpr,
        y=(float(window["screenY"]) + title + cy) * dpr,
        width=float(rect["width"]) * dpr,
        height=float(rect["height"]) * dpr,
        text=str(rect["text"]),
        tag=str(rect["tag"]),
    )


def model_point(x: float, y: float, region: Rect, image_width: int, image_height: int) -> tuple[int, int]:
    """A screen point (continuous physical pixels) as the model names it on the image it is shown.

    The captured `region` is scaled to `image_width` x `image_height`; the model answers with the
    point's position in that image as thousandths of its width and of its height."""
    image_x = (x - region.left) * image_width / region.width
    image_y = (y - region.top) * image_height / region.height
    if not (0 <= image_x < image_width and 0 <= image_y < image_height):
        raise BackendError(f"the screen point ({x:g}, {y:g}) is outside the captured region {region}")
    return round(image_x * MODEL_SCALE / image_width), round(image_y * MODEL_SCALE / image_height)


class MiniWoBOracle:
    """TextGenerator that solves the open MiniWoB task from its DOM; `region` is the captured monitor."""

    def __init__(self, browser: MiniWoBBrowser, region: Rect) -> None:
        self.browser = browser
        self.region = region
        self.requests = 0
        self._last: tuple[str, str] | None = None  # (instruction, last tool) for multi-step widgets
        self._solvers: dict[str, Callable[[str], _Step]] = {
            "click-button": self._click_button,
            "click-link": self._click_link,
            "focus-text": lambda _: self._click("#tt"),
            "enter-text": self._enter_text,
            "enter-password": self._enter_password,
            "login-user": self._login_user,
            "click-checkboxes": self._click_checkboxes,
            "click-option": self._click_option,
            "click-tab": self._click_tab,
            "click-dialog": lambda _: self._click(".ui-dialog-titlebar-close"),
            "click-collapsible": self._click_collapsible,
            "choose-list": self._choose_list,
            "scroll-text-2": self._scroll_text,
        }

    # -- the backend contract --

    def generate(self, request: ChatRequest) -> Generation:
        started = time.perf_counter()
        self.requests += 1
        if not request.images:
            raise BackendError("the oracle needs the screenshot's size")
        image = request.images[-1]
        text = self.answer(image.width, image.height)
        elapsed = time.perf_counter() - started
        return Generation(text, StepTimings(total_s=elapsed, decode_s=elapsed, tokens_out=len(text.split())))

    def answer(self, image_width: int, image_height: int) -> str:
        """The next step for the page as it is now, as holotron's text about an image of that size."""
        task = self.browser.task
        solver = self._solvers.get(task or "")
        if solver is None:
            raise BackendError(f"the oracle cannot solve {task!r}")
        instruction = str(self.browser.run_js("return core.getUtterance();"))
        step = solver(instruction)
        self._last = (instruction, step.name)
        return self._as_holotron_text(step, image_width, image_height, instruction)

    def _as_holotron_text(self, step: _Step, width: int, height: int, instruction: str) -> str:
        action: dict[str, Any] = {"name": step.name, **(step.arguments or {})}
        if step.at is not None:
            x, y = model_point(step.at.x, step.at.y, self.region, width, height)
            action.update(x=x, y=y)
        target = f" on {step.at.tag} {step.at.text[:30]!r}" if step.at is not None else ""
        return json.dumps(
            {"note": "", "thought": f"To do {instruction[:60]!r}: {step.name}{target}.", "action": action},
            ensure_ascii=False,
        )

    # -- page reading --

    def _targets(self, selector: str) -> list[_Target]:
        """Every element `selector` matches, placed on the screen by the oracle's own arithmetic."""
        elements = self.browser.run_js(_elements(selector)) or []
        found = self.browser.run_js(_RECTS_JS, list(elements))
        return [_on_screen(rect, found) for rect in found["rects"]]

    def _box(self, selector: str, text: str | None = None) -> _Target:
        boxes = [b for b in self._targets(selector) if b.visible]
        if text is not None:
            boxes = [b for b in boxes if b.text == text]
        if not boxes:
            raise BackendError(f"the oracle found no {selector} {text or ''} on the page")
        return boxes[0]

    def _click(self, selector: str, text: str | None = None) -> _Step:
        return _Step("click_desktop", self._box(selector, text))

    def _value(self, selector: str) -> str:
        return str(self.browser.run_js(f"return document.querySelector({json.dumps(selector)}).value;"))

    def _fill_then(self, fields: list[tuple[str, str]], submit: str) -> _Step:
        for selector, wanted in fields:
            if self._value(selector) != wanted:
                if self._value(selector):
                    # Wrong text in the field: select it all so the next write replaces it.
                    return _Step("click_desktop", self._box(selector), {"clicks": 3})
                return _Step("write_desktop", self._box(selector), {"content": wanted})
        return self._click(submit)

    # -- one solver per task --

    def _click_button(self, instruction: str) -> _Step:
        return self._click("#area button", _quoted(instruction))

    def _click_link(self, instruction: str) -> _Step:
        return self._click("#area .alink", _quoted(instruction))

    def _enter_text(self, instruction: str) -> _Step:
        return self._fill_then([("#tt", _quoted(instruction))], "#subbtn")

    def _enter_password(self, instruction: str) -> _Step:
        password = _quoted(instruction)
        return self._fill_then([("#password", password), ("#verify", password)], "#subbtn")

    def _login_user(self, instruction: str) -> _Step:
        user, password = re.findall(r'"([^"]*)"', instruction)[:2]
        return self._fill_then([("#username", user), ("#password", password)], "#subbtn")

    def _click_checkboxes(self, instruction: str) -> _Step:
        wanted_text = _between(instruction, "Select ", " and click Submit.")
        wanted = set() if wanted_text == "nothing" else {name.strip() for name in wanted_text.split(",")}
        labels = self.browser.run_js(
            "return Array.from(document.querySelectorAll('#boxes label')).map("
            "l => [l.textContent.trim(), l.querySelector('input').checked]);"
        )
        for index, (name, checked) in enumerate(labels):
            if (name in wanted) != bool(checked):
                return _Step("click_desktop", self._targets("#boxes input")[index])
        return self._click("#subbtn")

    def _click_option(self, instruction: str) -> _Step:
        wanted = _between(instruction, "Select ", " and click Submit.")
        labels = self.browser.run_js(
            "return Array.from(document.querySelectorAll('#boxes label')).map("
            "l => [l.textContent.trim(), l.querySelector('input').checked]);"
        )
        for index, (name, checked) in enumerate(labels):
            if name == wanted and not checked:
                return _Step("click_desktop", self._targets("#boxes input")[index])
        return self._click("#subbtn")

    def _click_tab(self, instruction: str) -> _Step:
        return self._click("#area ul a", _between(instruction, "Click on ", "."))

    def _click_collapsible(self, instruction: str) -> _Step:
        if self.browser.run_js("return $('.ui-accordion-content:visible').length;"):
            return self._click("#subbtn")
        return self._click("#area h3")

    def _choose_list(self, instruction: str) -> _Step:
        wanted = _between(instruction, "Select ", " from the list and click Submit.")
        chosen = self.browser.run_js(
            "var s = document.getElementById('options'); return s.options[s.selectedIndex].text;"
        )
        if chosen == wanted:
            return self._click("#area button")
        last_tool = self._last[1] if self._last is not None and self._last[0] == instruction else None
        if last_tool == "click_desktop":
            # The popup is open (a separate window): typing the option's name highlights it.
            return _Step("write_desktop", None, {"content": wanted})
        if last_tool == "write_desktop":
            return _Step("hotkey_desktop", None, {"keys": ["enter"]})
        return self._click("#options")

    def _scroll_text(self, instruction: str) -> _Step:
        to_bottom = "bottom" in instruction
        at_target = self.browser.run_js(
            "var t = document.getElementById('text-area');"
            "return arguments[0] ? t.scrollTop + t.clientHeight >= t.scrollHeight - 4 : t.scrollTop === 0;",
            to_bottom,
        )
        if at_target:
            return self._click("#subbtn")
        direction = "down" if to_bottom else "up"
        return _Step("scroll_desktop", self._box("#text-area"), {"direction": direction, "amount": 5})


def _quoted(instruction: str) -> str:
    match = re.search(r'"([^"]*)"', instruction)
    if match is None:
        raise BackendError(f"no quoted text in the instruction {instruction!r}")
    return match.group(1)


def _between(text: str, start: str, end: str) -> str:
    _, found, rest = text.partition(start)
    value, found_end, _rest = rest.partition(end)
    if not found or not found_end:
        raise BackendError(f"the instruction {text!r} is not shaped like {start}...{end}")
    return value.strip()
