"""Draw a proposed action onto a copy of its screenshot, for the terminal and for history.

Everything is drawn in screen space converted to the frame's pixels, so what the picture shows is
exactly where the input backend would act. Captions show model text escaped (automation.display_text):
text to type is drawn in full with its whitespace visible, wrapped over as many lines as it needs.
"""

from __future__ import annotations

from functools import lru_cache

from PIL import Image, ImageDraw, ImageFont

from holodesk.automation.actions import Action, Drag, Point, Scroll, TypeText
from holodesk.automation.display_text import safe_text, visible_text
from holodesk.automation.screen import ScreenFrame

MARKER_COLOUR = (255, 0, 170)
MARKER_RADIUS = 14
CAPTION_LINE_CHARS = 100
CAPTION_MAX_LINES = 40  # about 4,000 characters: more than that is summarised with its length


def typing_in_words(action: TypeText, *, focused_field: bool = False) -> str:
    """Every key a typing step presses, in order, without the text: select-all and Enter are never hidden,
    nor a line break in the text (pressed as Enter too).

    `focused_field` names where pointer-less typing goes ("into the focused field").
    """
    count = f"{len(action.text)} character{'s' if len(action.text) != 1 else ''}"
    if action.overwrite:
        place = f" at {action.at}" if action.at is not None else " in the focused field" if focused_field else ""
        words = f"select all{place} and type {count} over it"
    else:
        place = f" at {action.at}" if action.at is not None else " into the focused field" if focused_field else ""
        words = f"type {count}{place}"
    breaks = action.text.count("\n")
    if breaks:
        # A line break reaches the program as Enter: in a terminal the line before it runs.
        which = "the line break is" if breaks == 1 else f"each of the {breaks} line breaks is"
        words += f" in {breaks + 1} lines ({which} pressed as Enter)"
    return f"{words}, then press Enter" if action.press_enter else words


def caption_for(action: Action) -> str:
    """The action in words with model text escaped; text to type in full, whitespace visible.

    A typing step names select-all and Enter when it presses them.
    """
    if isinstance(action, TypeText):
        return f"{typing_in_words(action)}: {visible_text(action.text)}"
    return safe_text(action.describe())


@lru_cache(maxsize=1)
def _caption_font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """A monospaced font when one is installed (every visible-space marker then takes a column)."""
    try:
        return ImageFont.truetype("DejaVuSansMono.ttf", 13)
    except OSError:
        return ImageFont.load_default()


def _caption_lines(caption: str) -> list[str]:
    lines = [caption[i : i + CAPTION_LINE_CHARS] for i in range(0, len(caption), CAPTION_LINE_CHARS)] or [""]
    if len(lines) > CAPTION_MAX_LINES:
        hidden = len(lines) - CAPTION_MAX_LINES + 1
        lines = [*lines[: CAPTION_MAX_LINES - 2], f"... {hidden} more lines ...", lines[-1]]
    return lines


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
    caption = safe_text(label) if label else caption_for(action)
    if isinstance(action, Scroll | TypeText) and not points:
        caption = f"{caption} (at the keyboard focus / pointer)"
    text = "\n".join(_caption_lines(caption))
    anchor = points[0] if points else (10, 10)
    width = max(len(line) for line in text.splitlines())
    text_x = min(max(anchor[0] + 2 * MARKER_RADIUS, 4), max(4, image.width - 8 * width - 8))
    font = _caption_font()
    box = draw.multiline_textbbox((0, 0), text, font=font)
    text_y = min(max(anchor[1] - 2 * MARKER_RADIUS, 4), max(4, image.height - (box[3] - box[1]) - 8))
    box = draw.multiline_textbbox((text_x, text_y), text, font=font)
    draw.rectangle([box[0] - 3, box[1] - 2, box[2] + 3, box[3] + 2], fill=(0, 0, 0))
    draw.multiline_text((text_x, text_y), text, fill=(255, 255, 255), font=font)
    return image
