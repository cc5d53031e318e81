"""How to add one of Holodesk's optional parts, said for the way this Holodesk was installed.

From the Debian package (its environment is /usr/lib/holodesk) the advice is that environment's own
pip with the requirements file the package ships for the part (/usr/share/holodesk/<extra>-
requirements.txt, written from pyproject.toml's extra by packaging/debian/build-deb.sh): `pip install
'holodesk[eval]'` means nothing there. Anywhere else it is the extra itself, and a source tree's
editable form.
"""

from __future__ import annotations

import sys
from pathlib import Path

PACKAGE_PREFIX = Path("/usr/lib/holodesk")  # the package's environment (build-deb.sh's prefix)
PACKAGE_SHARE = Path("/usr/share/holodesk")  # where it ships the requirements files


def requirements_file(extra: str, share: Path = PACKAGE_SHARE) -> Path:
    return share / f"{extra}-requirements.txt"


def packaged(prefix: Path = PACKAGE_PREFIX, running: str | None = None) -> bool:
    """Whether this Holodesk runs from the package's environment."""
    here = Path(running if running is not None else sys.prefix)
    try:
        return here.resolve() == prefix.resolve()
    except OSError:
        return False


def install_extra(
    extra: str, *, prefix: Path = PACKAGE_PREFIX, share: Path = PACKAGE_SHARE, running: str | None = None
) -> str:
    """The command (in words) that installs `extra` into this Holodesk."""
    if packaged(prefix, running):
        return f"sudo {prefix / 'bin' / 'pip'} install -r {requirements_file(extra, share)}"
    return f"pip install 'holodesk[{extra}]' (from a source tree: pip install -e '.[{extra}]')"
