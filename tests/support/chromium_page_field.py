"""The Chromium field window (`ChromiumField`) with what a routine replay test also needs of the page:
where a field is on the screen, the page's focus taken away, a field made read-only, a value set.

Each goes through the page itself (a script run by chromedriver), never through the desktop: the
desktop's part (the clicks and keys) is what the test checks.
"""

from __future__ import annotations

from holodesk.automation.actions import Point
from tests.support.chromium_field import ChromiumField


class ChromiumPageField(ChromiumField):
    """A `ChromiumField` a test can also place, blur and lock."""

    def centre_on_screen(self, element: str) -> Point:
        """The centre of `element` in screen pixels, as the page places it: the window's content on the
        screen (Chromium's own title bar, if any, above it) plus the element's place in the page.

        Asked of the page, not of xdotool: under a reparenting window manager xdotool's geometry of
        Chromium's window counts the frame's title bar twice (20 px too low under openbox)."""
        x, y = self._script(
            "var r = document.getElementById(arguments[0]).getBoundingClientRect();"
            " var side = (window.outerWidth - window.innerWidth) / 2;"
            " return [window.screenX + side + r.left + r.width / 2,"
            " window.screenY + window.outerHeight - window.innerHeight - side + r.top + r.height / 2];",
            element,
        )
        return Point(round(x), round(y))

    def blur(self, element: str) -> None:
        """`element` emptied and without the page's focus (nothing in the page has it)."""
        self._script("var e = document.getElementById(arguments[0]); e.value = ''; e.blur();", element)

    def make_read_only(self, element: str, read_only: bool = True) -> None:
        """What the page does to a field it will not let you change: typing there changes nothing."""
        self._script("document.getElementById(arguments[0]).readOnly = arguments[1];", element, read_only)
