"""Model profiles by name: `get_profile("holotron")` and the names there are.

A profile is a model family's prompt, parser, coordinate convention and image budget (see
`inference.profiles.base`). `holotron` is the default; `holo1.5` and `holo1` speak the formats of
H Company's earlier Qwen2.5-VL based models; `holo3`, `holo3.1` and `holo4` its Qwen3.5-based agents
(inference.profiles.holo3; `holo3.1-tools` is Holo3.1 asked for native tool calls); `holotron3-nano`
its Nemotron-3-Nano-Omni based agent (inference.profiles.holotron3_nano).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from holodesk.inference.errors import InferenceError
from holodesk.inference.profiles.base import Profile

DEFAULT_PROFILE = "holotron"
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


class UnknownProfileError(InferenceError, ValueError):
    """No profile has that name; the message lists the ones there are."""


def _factory(name: str) -> Callable[..., Profile]:
    # Imported on demand: each profile module is small, but there is no need to load them all.
    if name in ("holo3", "holo3.1", "holo3.1-tools", "holo4"):
        from holodesk.inference.profiles import holo3

        return {
            "holo3": holo3.Holo3Profile,
            "holo3.1": holo3.Holo31Profile,
            "holo3.1-tools": holo3.Holo31ToolsProfile,
            "holo4": holo3.Holo4Profile,
        }[name]
    if name == "holotron3-nano":
        from holodesk.inference.profiles.holotron3_nano import Holotron3NanoProfile

        return Holotron3NanoProfile
    if name == "holotron":
        from holodesk.inference.profiles.holotron import HolotronProfile

        return HolotronProfile
    if name == "holo1.5":
        from holodesk.inference.profiles.holo15 import Holo15Profile

        return Holo15Profile
    from holodesk.inference.profiles.holo1 import Holo1Profile

    return Holo1Profile


def canonical_profile_name(name: str) -> str:
    """The registered name for `name` (case and common spellings forgiven), or UnknownProfileError."""
    if not isinstance(name, str):
        raise UnknownProfileError(f"a profile name must be text, got {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in PROFILE_NAMES:
        raise UnknownProfileError(f"unknown model profile {name!r}; known profiles: {', '.join(PROFILE_NAMES)}")
    return key


def get_profile(name: str = DEFAULT_PROFILE, **options: Any) -> Profile:
    """A new profile by name; `options` go to its constructor (budget=, prompts_dir=, ...)."""
    return _factory(canonical_profile_name(name))(**options)


__all__ = ["DEFAULT_PROFILE", "PROFILE_NAMES", "UnknownProfileError", "canonical_profile_name", "get_profile"]
