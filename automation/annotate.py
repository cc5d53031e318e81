"""Draw a proposed action onto a copy of its screenshot, for the terminal and for history.

Everything is drawn in screen space converted to the frame's pixels, so what the picture shows is
exactly where the executor would act.
"""

from __future__ import annotations

from PIL import Image, ImageDraw

from holodesk.automation.actions import Action, Drag, Point, Scroll, TypeText
from holodesk.automation.screen import ScreenFrame

MARKER_COLOUR = (255, 0, 170)
MARKER_RADIUS = 14


def annotate(frame: ScreenFrame, action: Action, label: str = "") -> Image.Image:
    """The frame as an RGB image with `action`'s target(s) drawn on it (action in screen space)."""
    image: Image.Image = frame.to_image()
    draw = ImageDraw.Draw(image)
    left, top = frame.region.left, frame.region.top

    def local(point: Point) -> tuple[int, int]:
        return point.x - left, point.y - top

    points = [local(p) for p in action.points()]
    if isinstance(action, Drag) and len(points) == 2:
        draw.line([points[0], points[1]], fill=MARKER_COLOUR, width=3)
    for x, y in points:
        r = MARKER_RADIUS
        draw.ellipse([x - r, y - r, x + r, y + r], outline=MARKER_COLOUR, width=3)
        draw.line([x - 2 * r, y, x - 4, y], fill=MARKER_COLOUR, width=2)
        draw.line([x + 4, y, x + 2 * r, y], fill=MARKER_COLOUR, width=2)
        draw.line([x, y - 2 * r, x, y - 4], fill=MARKER_COLOUR, width=2)
        draw.line([x, y + 4, x, y + 2 * r], fill=MARKER_COLOUR, width=2)
    caption = label or action.describe()
    if isinstance(action, Scroll | TypeText) and not points:
        caption = f"{caption} (at the keyboard focus / pointer)"
    anchor = points[0] if points else (10, 10)
    text_x = min(max(anchor[0] + 2 * MARKER_RADIUS, 4), max(4, image.width - 8 * len(caption) - 8))
    text_y = min(max(anchor[1] - 2 * MARKER_RADIUS, 4), image.height - 20)
    box = draw.textbbox((text_x, text_y), caption)
    draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill=(0, 0, 0))
    draw.text((text_x, text_y), caption, fill=(255, 255, 255))
    return image
