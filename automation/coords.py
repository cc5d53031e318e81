"""The one place that converts coordinates between spaces. Nothing else does this arithmetic.

Spaces:
- model space: what a profile's model emits; either integers in [0, 1000] relative to the image it
  was shown (`NormalizedSpace`) or absolute pixels of that (possibly resized) image (`ImagePixelSpace`).
- image space: pixels of the frame as sent to the model, after any resize.
- screen space: physical pixels of the virtual desktop, as mss and pyautogui see them on X11 and
  Windows. Monitors may sit at negative offsets and have different scale factors.
- window-system space: where Holodesk's own windows live. On X11 and Windows it is screen space. On
  a Wayland session, screen space is the portal's (each stream's physical pixels) while Holodesk's
  windows, through XWayland, live on the X screen: the same monitors, possibly scaled. On GNOME at
  scale 1 (and at integer scales, where mutter lays monitors out in physical pixels) the two
  coincide. With fractional scaling, mutter before 47 gives XWayland logical pixels (a 2560x1600
  monitor at 200% is 1280x800 on the X screen, its X windows upscaled); mutter 47's
  xwayland-native-scaling gives it physical ones. `remap_point` carries a point across.
- Qt logical space: what a widget on a given monitor draws in. Qt keeps each screen's top-left
  where it is natively and divides distances from it by the screen's device-pixel ratio.

Pixel convention: integer pixel (i, j) covers [i, i+1) x [j, j+1); conversions go through pixel
centres and floor back, so a point always lands on a pixel that exists in the target space.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from holodesk.automation.actions import Action, Point
from holodesk.automation.errors import OffScreenError

NORMALIZED_MAX = 1000


@dataclass(frozen=True, slots=True)
class Rect:
    """An axis-aligned rectangle of whole pixels; `right` and `bottom` are exclusive."""

    left: int
    top: int
    width: int
    height: int

    def __post_init__(self) -> None:
        for name in ("left", "top", "width", "height"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"Rect.{name} must be an integer, got {value!r}")
        if self.width <= 0 or self.height <= 0:
            raise ValueError(f"Rect must have a positive size, got {self.width}x{self.height}")

    @property
    def right(self) -> int:
        return self.left + self.width

    @property
    def bottom(self) -> int:
        return self.top + self.height

    def contains(self, point: Point) -> bool:
        return self.left <= point.x < self.right and self.top <= point.y < self.bottom

    def __str__(self) -> str:
        return f"{self.width}x{self.height}{self.left:+d}{self.top:+d}"


@dataclass(frozen=True, slots=True)
class Monitor:
    """One monitor: its rectangle in screen space (physical pixels) and its scale factor.

    `scale` is the device-pixel ratio where the platform reports one; 1.0 where it does not.
    `index` follows mss: 1 is the first monitor (0 is mss's whole virtual desktop).
    """

    index: int
    rect: Rect
    scale: float = 1.0
    name: str = ""
    is_primary: bool = False

    def __post_init__(self) -> None:
        if not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError(f"monitor scale must be a positive number, got {self.scale!r}")

    def __str__(self) -> str:
        label = self.name or f"monitor {self.index}"
        return f"{label} {self.rect} scale {self.scale:g}"


@dataclass(frozen=True, slots=True)
class NormalizedSpace:
    """Model coordinates are integers in [0, maximum] relative to the image's width and height."""

    maximum: int = NORMALIZED_MAX


@dataclass(frozen=True, slots=True)
class ImagePixelSpace:
    """Model coordinates are absolute pixels of the image the model was shown (after resize)."""


ModelSpace = NormalizedSpace | ImagePixelSpace


@dataclass(frozen=True, slots=True)
class FrameMapping:
    """How one frame sent to the model relates to the screen.

    `region` is the part of the virtual desktop that was captured (physical pixels) and
    `image_width` x `image_height` the size of the image the model saw after resizing.
    """

    region: Rect
    image_width: int
    image_height: int

    def __post_init__(self) -> None:
        if self.image_width <= 0 or self.image_height <= 0:
            raise ValueError(f"image size must be positive, got {self.image_width}x{self.image_height}")

    # -- model <-> image -------------------------------------------------------------------------

    def model_to_image(self, point: Point, space: ModelSpace) -> Point:
        """A model-space point as a pixel of the image; out-of-range values are an OffScreenError."""
        if isinstance(space, NormalizedSpace):
            for value, axis in ((point.x, "x"), (point.y, "y")):
                if not 0 <= value <= space.maximum:
                    raise OffScreenError(f"model {axis}={value} is outside [0, {space.maximum}]")
            # The value is a fraction of the image; the far edge (maximum) belongs to the last pixel.
            x = min(math.floor(point.x * self.image_width / space.maximum), self.image_width - 1)
            y = min(math.floor(point.y * self.image_height / space.maximum), self.image_height - 1)
            return Point(x, y)
        if not (0 <= point.x < self.image_width and 0 <= point.y < self.image_height):
            raise OffScreenError(
                f"model point {point} is outside the {self.image_width}x{self.image_height} image it refers to"
            )
        return point

    def image_to_model(self, point: Point, space: ModelSpace) -> Point:
        """An image pixel in model space (its centre, rounded to the model's grid)."""
        self._check_in_image(point)
        if isinstance(space, NormalizedSpace):
            x = round((point.x + 0.5) * space.maximum / self.image_width)
            y = round((point.y + 0.5) * space.maximum / self.image_height)
            return Point(min(x, space.maximum), min(y, space.maximum))
        return point

    # -- image <-> screen ------------------------------------------------------------------------

    def image_to_screen(self, point: Point) -> Point:
        """The screen pixel under the centre of an image pixel."""
        self._check_in_image(point)
        region = self.region
        x = region.left + math.floor((point.x + 0.5) * region.width / self.image_width)
        y = region.top + math.floor((point.y + 0.5) * region.height / self.image_height)
        return Point(x, y)

    def screen_to_image(self, point: Point) -> Point:
        """The image pixel that shows a screen pixel; a point outside the region is an OffScreenError."""
        if not self.region.contains(point):
            raise OffScreenError(f"screen point {point} is outside the captured region {self.region}")
        region = self.region
        x = math.floor((point.x - region.left + 0.5) * self.image_width / region.width)
        y = math.floor((point.y - region.top + 0.5) * self.image_height / region.height)
        return Point(x, y)

    # -- model <-> screen ------------------------------------------------------------------------

    def model_to_screen(self, point: Point, space: ModelSpace) -> Point:
        return self.image_to_screen(self.model_to_image(point, space))

    def screen_to_model(self, point: Point, space: ModelSpace) -> Point:
        return self.image_to_model(self.screen_to_image(point), space)

    def _check_in_image(self, point: Point) -> None:
        if not (0 <= point.x < self.image_width and 0 <= point.y < self.image_height):
            raise OffScreenError(f"image point {point} is outside the {self.image_width}x{self.image_height} image")


def monitor_at(point: Point, monitors: Sequence[Monitor]) -> Monitor:
    """The monitor that shows a screen point, or an OffScreenError naming the monitors there are."""
    for monitor in monitors:
        if monitor.rect.contains(point):
            return monitor
    known = "; ".join(str(m) for m in monitors) or "no monitors"
    raise OffScreenError(f"screen point {point} is on no monitor ({known})")


def action_to_screen(action: Action, space: ModelSpace, mapping: FrameMapping, monitors: Sequence[Monitor]) -> Action:
    """Map a model-space action to screen space, and check that every point lands on a monitor."""
    screen_action = action.map_points(lambda point: mapping.model_to_screen(point, space))
    for point in screen_action.points():
        monitor_at(point, monitors)
    return screen_action


def action_to_model(action: Action, space: ModelSpace, mapping: FrameMapping) -> Action:
    """Map a screen-space action (for example one the user edited) back to model space."""
    return action.map_points(lambda point: mapping.screen_to_model(point, space))


def screen_to_logical(point: Point, monitor: Monitor) -> tuple[float, float]:
    """A screen pixel as Qt logical coordinates on the given monitor (top-left of that pixel)."""
    rect = monitor.rect
    return (rect.left + (point.x - rect.left) / monitor.scale, rect.top + (point.y - rect.top) / monitor.scale)


def logical_to_screen(x: float, y: float, monitor: Monitor) -> Point:
    """Qt logical coordinates on a monitor back to the screen pixel they fall in."""
    rect = monitor.rect
    return Point(
        rect.left + math.floor((x - rect.left) * monitor.scale + 1e-9),
        rect.top + math.floor((y - rect.top) * monitor.scale + 1e-9),
    )


def virtual_desktop(monitors: Sequence[Monitor]) -> Rect:
    """The bounding rectangle of all monitors (screen space)."""
    if not monitors:
        raise OffScreenError("there are no monitors")
    left = min(m.rect.left for m in monitors)
    top = min(m.rect.top for m in monitors)
    right = max(m.rect.right for m in monitors)
    bottom = max(m.rect.bottom for m in monitors)
    return Rect(left, top, right - left, bottom - top)


def _spatial_order(monitors: Sequence[Monitor]) -> list[Monitor]:
    return sorted(monitors, key=lambda m: (m.rect.left, m.rect.top))


def layouts_match(first: Sequence[Monitor], second: Sequence[Monitor]) -> bool:
    """Whether two descriptions of the monitors have the same rectangles (nothing to remap)."""
    return [m.rect for m in _spatial_order(first)] == [m.rect for m in _spatial_order(second)]


def remap_point(point: Point, source: Sequence[Monitor], target: Sequence[Monitor]) -> Point:
    """The pixel of `target`'s space that shows what pixel `point` of `source`'s space shows.

    `source` and `target` describe the same monitors in two spaces (screen space and window-system
    space, see the module docstring); they are paired in spatial order (left to right, then top to
    bottom), which scaling keeps. Each monitor maps onto its counterpart linearly through pixel
    centres. OffScreenError when the point is on no monitor, or the two do not have as many monitors.
    """
    if len(source) != len(target):
        raise OffScreenError(
            f"the screen has {len(source)} monitor(s) but Holodesk's windows see {len(target)}: "
            "cannot tell where a point is"
        )
    mine = monitor_at(point, source)
    theirs = _spatial_order(target)[_spatial_order(source).index(mine)]
    a, b = mine.rect, theirs.rect
    x = b.left + math.floor((point.x - a.left + 0.5) * b.width / a.width)
    y = b.top + math.floor((point.y - a.top + 0.5) * b.height / a.height)
    return Point(x, y)
