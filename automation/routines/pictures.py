"""A routine's pictures on disk: read only as PNG files inside the routine's folder, written privately.

A routine folder holds typed text and pieces of the screen, so it is private like a session: the
folders are 0700 and the files 0600. A crop is read only when its path stays inside the routine's
folder with no symbolic link on the way, the file is a PNG, its header names no more than
MAX_PICTURE_PIXELS and it decodes whole; anything else is a `PictureError` that says what is wrong
with which file (never a traceback). The size is read from the PNG header before anything is decoded:
a 100 KB file can name 30000x30000 pixels (a decompression bomb: gigabytes once decoded).

`featureless` is the check both the compiler and a repair use before writing a crop: a picture of
one colour (a click into a terminal's or an editor's plain background) matches anywhere, so no
replay could ever find its target again.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from holodesk.automation.errors import AutomationError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
# A grey-level spread under this is one plain colour (the locators' own `_flat` test is 2.0; a
# crop needs some margin above it to be told apart from its neighbourhood).
FEATURELESS_SPREAD = 4.0
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# A routine's picture is a piece of the screen: 50 megapixels is more than three 4K monitors side by
# side (25 MP), and decodes to 150 MB of RGB; above it a file is refused before it is decoded.
MAX_PICTURE_PIXELS = 50_000_000


class PictureError(AutomationError):
    """A routine's picture that cannot be used, in words."""


def private_folder(folder: Path) -> Path:
    """Create `folder` (and its parents) if needed and make it 0700; returns it."""
    folder.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
    os.chmod(folder, PRIVATE_DIR_MODE)
    return folder


def make_private(folder: Path) -> None:
    """Make a routine folder saved before routines were private 0700, and its files 0600 (links left
    alone, never followed). What cannot be changed (another user's folder) is left as it is."""
    for path in (folder, *folder.rglob("*")):
        if path.is_symlink():
            continue
        wanted = PRIVATE_DIR_MODE if path.is_dir() else PRIVATE_FILE_MODE
        try:
            if path.stat().st_mode & 0o777 != wanted:
                os.chmod(path, wanted)
        except OSError:
            continue


def write_private(path: Path, data: bytes) -> None:
    """Write `data` to `path` as a 0600 file, atomically (temp file, fsync, rename); never through a link."""
    tmp = path.with_name(path.name + ".part")
    descriptor = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, PRIVATE_FILE_MODE)
    try:
        os.fchmod(descriptor, PRIVATE_FILE_MODE)
        with os.fdopen(descriptor, "wb") as handle:
            descriptor = -1
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        if descriptor >= 0:
            os.close(descriptor)
    os.replace(tmp, path)


def save_png(picture: Image.Image, path: Path) -> None:
    """Save `picture` as a private PNG file at `path` (its folder made private too)."""
    import io

    private_folder(path.parent)
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    write_private(path, buffer.getvalue())


def picture_path(folder: Path, relative: str) -> Path:
    """`folder/relative`, refused (PictureError) unless it stays inside `folder` with no link on the way."""
    parts = Path(relative).parts
    if not relative or Path(relative).is_absolute() or ".." in parts:
        raise PictureError(f"the picture {relative!r} is not a path inside the routine's folder")
    path = folder
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise PictureError(
                f"the picture {relative!r} is a link ({path}); a routine's pictures are files of its own folder"
            )
    return path


def load_picture(folder: Path, relative: str) -> np.ndarray:
    """The picture `relative` inside the routine's `folder` as an RGB array, or PictureError in words."""
    path = picture_path(folder, relative)
    if not path.is_file():
        raise PictureError(f"the picture {path} is missing")
    try:
        with open(path, "rb", opener=_no_follow) as handle:
            header = handle.read(len(PNG_SIGNATURE) + 16)
            if header[: len(PNG_SIGNATURE)] != PNG_SIGNATURE:
                raise PictureError(f"the picture {path} is not a PNG file")
            check_pixels(path, *png_size(path, header))
            handle.seek(0)
            with Image.open(handle, formats=["PNG"]) as image:
                check_pixels(path, *image.size)  # what the decoder will make, whatever the header said
                image.load()  # a truncated file fails here, not later in the middle of a replay
                return np.asarray(image.convert("RGB"))
    except PictureError:
        raise
    except Image.DecompressionBombError as exc:  # PIL's own bound, should ours ever be raised above it
        raise PictureError(f"the picture {path} is too large to decode ({exc})") from None
    except (OSError, UnidentifiedImageError, SyntaxError, ValueError) as exc:
        raise PictureError(f"the picture {path} cannot be read as a PNG ({exc})") from None


def png_size(path: Path, header: bytes) -> tuple[int, int]:
    """Width and height from a PNG file's first 24 bytes (its IHDR chunk), without decoding anything."""
    start = len(PNG_SIGNATURE)
    if len(header) < start + 16 or header[start + 4 : start + 8] != b"IHDR":
        raise PictureError(f"the picture {path} is not a PNG file (no IHDR header)")
    return int.from_bytes(header[start + 8 : start + 12], "big"), int.from_bytes(header[start + 12 : start + 16], "big")


def check_pixels(path: Path, width: int, height: int) -> None:
    """PictureError, in words, for a picture larger than MAX_PICTURE_PIXELS (before it is decoded)."""
    if width * height > MAX_PICTURE_PIXELS:
        raise PictureError(
            f"the picture {path} is {width}x{height} pixels ({width * height / 1e6:.0f} megapixels), more than "
            f"the {MAX_PICTURE_PIXELS / 1e6:.0f} a routine's picture may have; it was not decoded (a piece of "
            "the screen is never that large: the file was made or changed by something else)"
        )


def check_picture(folder: Path, relative: str) -> str:
    """Why the picture cannot be used, or "" when it can (what the routine file's loader reports)."""
    try:
        load_picture(folder, relative)
    except PictureError as exc:
        return str(exc)
    return ""


def featureless(rgb: np.ndarray) -> bool:
    """Whether a picture is one plain colour (or nearly): no replay can find it again."""
    grey = rgb[:, :, :3].astype(np.float32) @ np.array([0.299, 0.587, 0.114], dtype=np.float32)
    return bool(grey.size == 0 or float(grey.std()) < FEATURELESS_SPREAD)


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW)
