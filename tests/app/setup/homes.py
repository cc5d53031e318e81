"""A throwaway home for `holodesk setup` in a child process: its folders, its settings file, its environment."""

from __future__ import annotations

import os
from pathlib import Path

# The ones that would let a child skip the hub, or use the developer's own token.
HUB_VARIABLES_NOT_PASSED = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN")


def make_home(root: Path) -> Path:
    folder = root / "home"
    (folder / ".config" / "holodesk").mkdir(parents=True)
    return folder


def settings_file(home: Path) -> Path:
    return home / ".config" / "holodesk" / "settings.toml"


def setup_environment(home: Path, endpoint: str, **extra: str) -> dict[str, str]:
    """This process's environment with `home` as the user's and `endpoint` as the hub, plus `extra`."""
    env = {key: value for key, value in os.environ.items() if key not in HUB_VARIABLES_NOT_PASSED}
    return env | {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "HF_HOME": str(home / ".cache" / "huggingface"),
        "HF_ENDPOINT": endpoint,
        "HF_HUB_DISABLE_TELEMETRY": "1",
        **extra,
    }
