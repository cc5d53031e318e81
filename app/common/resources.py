"""Find the files under assets/ (icons, prompts) whether Holodesk runs from the repo or is installed."""

from __future__ import annotations

from pathlib import Path

from holodesk.app.common.errors import HolodeskAppError

# app/common/resources.py -> the repository root (or the installed holodesk/ folder) -> assets/
ASSETS = Path(__file__).resolve().parents[2] / "assets"


class ResourceError(HolodeskAppError, FileNotFoundError):
    """An asset Holodesk ships is missing: the install is incomplete."""


def icon_path(name: str) -> Path:
    """assets/icons/<name>.svg, or ResourceError naming where it looked."""
    path = ASSETS / "icons" / f"{name}.svg"
    if not path.is_file():
        raise ResourceError(f"icon {name!r} not found at {path}: reinstall Holodesk")
    return path
