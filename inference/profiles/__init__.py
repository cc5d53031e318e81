"""Model profiles by name: `get_profile("holotron")` and the names there are.

A profile is a model family's prompt, parser, coordinate convention and image budget (see
`inference.profiles.base`). `holotron` is the default; `holo1.5` and `holo1` speak the formats of
H Company's earlier Qwen2.5-VL based models; `holo3`, `holo3.1` and `holo4` its Qwen3.5-based agents
(inference.profiles.holo3; `holo3.1-tools` is Holo3.1 asked for native tool calls); `holotron3-nano`
its Nemotron-3-Nano-Omni based agent (inference.profiles.holotron3_nano).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from holodesk.inference.errors import InferenceError
from holodesk.inference.profiles import holo3
from holodesk.inference.profiles.base import Profile
from holodesk.inference.profiles.holo1 import Holo1Profile
from holodesk.inference.profiles.holo15 import Holo15Profile
from holodesk.inference.profiles.holotron import HolotronProfile
from holodesk.inference.profiles.holotron3_nano import Holotron3NanoProfile

DEFAULT_PROFILE = "holotron"
# The models each profile is for, in the words a user knows them by (the settings window shows them).
PROFILE_MODELS: dict[str, str] = {
    "holotron": "Holotron-12B",
    "holotron3-nano": "Holotron-3-Nano",
    "holo4": "Holo4 27B, 35B-A3B",
    "holo3.1": "Holo3.1 0.8B to 35B-A3B, structured output",
    "holo3.1-tools": "Holo3.1 with native tool calls",
    "holo3": "Holo3 35B-A3B",
    "holo1.5": "Holo1.5 (Qwen2.5-VL)",
    "holo1": "Holo1 (Qwen2.5-VL)",
}
PROFILE_NAMES: tuple[str, ...] = (
    "holotron",
    "holotron3-nano",
    "holo4",
    "holo3.1",
    "holo3.1-tools",
    "holo3",
    "holo1.5",
    "holo1",
)
# Spellings people type for the same profiles.
_ALIASES = {
    "holo15": "holo1.5",
    "holo1_5": "holo1.5",
    "holo-1.5": "holo1.5",
    "holo-1": "holo1",
    "holo-3": "holo3",
    "holo3-1": "holo3.1",
    "holo3_1": "holo3.1",
    "holo-3.1": "holo3.1",
    "holo31": "holo3.1",
    "holo3.1-native": "holo3.1-tools",
    "holo3.1_tools": "holo3.1-tools",
    "holo31-tools": "holo3.1-tools",
    "holo-4": "holo4",
    "holotron-3-nano": "holotron3-nano",
    "holotron3_nano": "holotron3-nano",
    "holotron_3_nano": "holotron3-nano",
    "holotron3nano": "holotron3-nano",
}


# H Company's current agents by the names they are published or served under: their hub ids
# (Hcompany/Holo3-35B-A3B, Hcompany/Holo-3.1-35B-A3B, Hcompany/Holo4-35B-A3B-FP8, Hcompany/Holotron-3-Nano...)
# or the names holo-desktop-cli serves them as (holo4-35b-a3b, holo4-27b, holo3-1-35b-a3b). Holo3.1
# before Holo3, and "3.1" only when no digit follows (holo3-122b-a10b is Holo3); Holotron-3 but not
# Holotron-12B (that is the holotron profile's own model).
_MODEL_FAMILIES = (
    ("holotron3-nano", re.compile(r"holotron[-_ ]?3(?!\d)")),
    ("holo4", re.compile(r"holo[-_ ]?4(?!\d)")),
    ("holo3.1", re.compile(r"holo[-_ ]?3[._-]1(?!\d)")),
    ("holo3", re.compile(r"holo[-_ ]?3(?!\d)")),
)
_HOLOTRON_12B = re.compile(r"holotron[-_ ]?12b")


class UnknownProfileError(InferenceError, ValueError):
    """No profile has that name; the message names the closest one, if any, and lists the ones there are."""


def model_family(model: str) -> str | None:
    """The profile for a model name of H Company's current agents (holo3, holo3.1, holo4, holotron3-nano), or None."""
    lowered = model.lower()
    return next((profile for profile, pattern in _MODEL_FAMILIES if pattern.search(lowered)), None)


def closest_profile(name: str) -> str | None:
    """The profile a name that is none meant, if one is close: a model's name (Hcompany/Holo4-35B-A3B is
    holo4), or a near spelling (holo3.2 is holo3.1); None when nothing is close."""
    spellings = {**{profile: profile for profile in PROFILE_NAMES}, **_ALIASES}
    # 0.85: one wrong character in a short name ("holo3.2"), but not another model ("holo2" is not holo1).
    near = difflib.get_close_matches(name.strip().lower(), list(spellings), n=1, cutoff=0.85)
    if near:
        return spellings[near[0]]
    if _HOLOTRON_12B.search(name.lower()):
        return "holotron"
    return model_family(name)


def _factory(name: str) -> Callable[..., Profile]:
    if name in ("holo3", "holo3.1", "holo3.1-tools", "holo4"):
        return {
            "holo3": holo3.Holo3Profile,
            "holo3.1": holo3.Holo31Profile,
            "holo3.1-tools": holo3.Holo31ToolsProfile,
            "holo4": holo3.Holo4Profile,
        }[name]
    if name == "holotron3-nano":
        return Holotron3NanoProfile
    if name == "holotron":
        return HolotronProfile
    if name == "holo1.5":
        return Holo15Profile

    return Holo1Profile


def canonical_profile_name(name: str) -> str:
    """The registered name for `name` (case and common spellings forgiven), or UnknownProfileError."""
    if not isinstance(name, str):
        raise UnknownProfileError(f"a profile name must be text, got {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in PROFILE_NAMES:
        closest = closest_profile(name)
        hint = f"; the closest is {closest}" if closest else ""
        raise UnknownProfileError(f"unknown model profile {name!r}{hint}; known profiles: {', '.join(PROFILE_NAMES)}")
    return key


def get_profile(name: str = DEFAULT_PROFILE, **options: Any) -> Profile:
    """A new profile by name; `options` go to its constructor (budget=, prompts_dir=, ...)."""
    return _factory(canonical_profile_name(name))(**options)


__all__ = [
    "DEFAULT_PROFILE",
    "PROFILE_MODELS",
    "PROFILE_NAMES",
    "UnknownProfileError",
    "canonical_profile_name",
    "closest_profile",
    "get_profile",
    "model_family",
]
