"""Desktop-like screen content for benchmarks, drawn with PIL and shown on a private Xvfb.

A flat grey screen would make resizing and PNG encoding unrealistically cheap, so the picture has
windows, title bars, text, buttons, a gradient and a photo-like noisy area. It is set as the X root
window's background (as `xsetroot` does), so mss reads it back like any other screen content.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from PIL import Image, ImageDraw

from holodesk.automation.virtual_display import DisplayLayout, XvfbServer, xvfb_display

# A core-protocol request is at most 65535 four-byte units long: one BGRX pixel is one unit.
_UNITS_PER_REQUEST = 60_000


def desktop_picture(width: int, height: int, seed: int = 0) -> Image.Image:
    """A made-up desktop: a wallpaper gradient, overlapping windows with text, a photo, a task bar."""
    rng = np.random.default_rng(seed)
    ramp = np.linspace(0, 1, width, dtype=np.float32)[None, :] * np.linspace(0.6, 1, height, dtype=np.float32)[:, None]
    wallpaper = np.stack([40 + 60 * ramp, 80 + 90 * ramp, 140 + 100 * ramp], axis=2).astype(np.uint8)
    image = Image.fromarray(wallpaper, "RGB")
    draw = ImageDraw.Draw(image)
    for window in range(6):
        left = int(rng.integers(0, max(1, width - 700)))
        top = int(rng.integers(0, max(1, height - 500)))
        right, bottom = left + int(rng.integers(400, 900)), top + int(rng.integers(300, 650))
        draw.rectangle((left, top, right, bottom), fill=(245, 245, 245), outline=(90, 90, 90), width=1)
        draw.rectangle((left, top, right, top + 30), fill=(55, 60, 72))
        draw.text((left + 10, top + 9), f"Window {window} - Document.txt", fill=(255, 255, 255))
        for line in range(top + 45, bottom - 20, 18):
            words = " ".join("lorem" if rng.random() < 0.5 else "ipsum" for _ in range(int(rng.integers(3, 14))))
            draw.text((left + 12, line), words, fill=(20, 20, 20))
        draw.rounded_rectangle((right - 110, bottom - 40, right - 12, bottom - 12), radius=6, fill=(30, 120, 220))
        draw.text((right - 90, bottom - 32), "OK", fill=(255, 255, 255))
    photo_width, photo_height = width // 4, height // 4
    photo = rng.normal(128, 50, (photo_height, photo_width, 3)).clip(0, 255).astype(np.uint8)
    image.paste(Image.fromarray(photo, "RGB"), (width - photo_width - 40, height - photo_height - 80))
    draw.rectangle((0, height - 40, width, height), fill=(30, 30, 36))
    for slot in range(12):
        draw.rounded_rectangle((10 + slot * 48, height - 34, 46 + slot * 48, height - 6), radius=4, fill=(90, 110, 140))
    return image


def show_on_root(picture: Image.Image) -> None:
    """Make `picture` the root window's background on $DISPLAY (it must match the screen's size)."""
    from Xlib import X, display

    connection = display.Display()
    try:
        screen = connection.screen()
        root = screen.root
        if (picture.width, picture.height) != (screen.width_in_pixels, screen.height_in_pixels):
            raise ValueError(
                f"picture is {picture.width}x{picture.height}, the screen {screen.width_in_pixels}x"
                f"{screen.height_in_pixels}"
            )
        # 24-bit TrueColor servers take 32 bits a pixel, blue first: BGRX.
        bgrx = np.asarray(picture.convert("RGBA"))[:, :, [2, 1, 0, 3]].copy()
        pixmap = root.create_pixmap(picture.width, picture.height, screen.root_depth)
        context = pixmap.create_gc()
        rows_per_request = max(1, _UNITS_PER_REQUEST // picture.width)
        for top in range(0, picture.height, rows_per_request):
            rows = bgrx[top : top + rows_per_request]
            pixmap.put_image(
                context, 0, top, picture.width, rows.shape[0], X.ZPixmap, screen.root_depth, 0, rows.tobytes()
            )
        root.change_attributes(background_pixmap=pixmap)
        root.clear_area(0, 0, 0, 0)  # repaint the whole root with its new background
        context.free()
        pixmap.free()  # the root keeps its own reference, as with xsetroot
        connection.sync()
    finally:
        connection.close()


@contextmanager
def desktop_display(width: int, height: int, seed: int = 0) -> Iterator[XvfbServer]:
    """A private Xvfb of `width` x `height` showing `desktop_picture`, used as $DISPLAY for the block."""
    with xvfb_display(DisplayLayout(width, height)) as server:
        show_on_root(desktop_picture(width, height, seed))
        yield server
