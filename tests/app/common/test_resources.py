"""Every icon the app asks for exists and renders."""

from __future__ import annotations

import pytest

from holodesk.app.common.resources import ResourceError, icon_path
from holodesk.app.gui.app_state import AppState
from holodesk.app.gui.main import tray_icon


@pytest.mark.parametrize("state", list(AppState), ids=str)
def test_every_state_has_an_icon_that_renders(qapp, state):
    pixmap = tray_icon(state).pixmap(22, 22)
    assert not pixmap.isNull()
    image = pixmap.toImage()
    opaque = sum(image.pixelColor(x, y).alpha() > 0 for x in range(22) for y in range(22))
    assert opaque > 100  # a drawn shape, not an empty or broken image


def test_the_app_icon_exists():
    assert icon_path("holodesk").read_text(encoding="utf-8").lstrip().startswith("<?xml")


def test_a_missing_icon_is_a_clear_error():
    with pytest.raises(ResourceError, match="tray-sleeping"):
        icon_path("tray-sleeping")
