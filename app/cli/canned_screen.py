"""A canned screenshot for `holodesk doctor --try` and the server checks: one step on a known picture."""

from __future__ import annotations

import time

import numpy as np
from PIL import Image, ImageDraw

from holodesk.automation.coords import Rect
from holodesk.automation.screen import ScreenFrame


def canned_screenshot() -> ScreenFrame:
    """A 1280x800 desktop-like frame (a mail window with a search field and an Archive button)."""
    image = Image.new("RGB", (1280, 800), (32, 96, 160))
    draw = ImageDraw.Draw(image)
    draw.rectangle((160, 120, 1120, 700), fill=(240, 240, 240), outline=(0, 0, 0))
    draw.rectangle((160, 120, 1120, 150), fill=(60, 60, 70))
    draw.text((172, 128), "Mail - Inbox (3 unread)", fill=(255, 255, 255))
    draw.rectangle((200, 180, 800, 210), fill=(255, 255, 255), outline=(120, 120, 120))
    draw.text((208, 188), "Search mail", fill=(128, 128, 128))
    draw.rectangle((960, 640, 1100, 680), fill=(30, 120, 220))
    draw.text((1004, 652), "Archive", fill=(255, 255, 255))
    rgb = np.asarray(image)
    bgra = np.concatenate([rgb[:, :, ::-1], np.full((*rgb.shape[:2], 1), 255, np.uint8)], axis=2)
    return ScreenFrame(
        pixels=np.ascontiguousarray(bgra),
        region=Rect(0, 0, image.width, image.height),
        monitor=None,
        monitors=(),
        captured_at=time.monotonic(),
    )
