"""Prompt texts are data: `assets/prompts/<name>.txt`, loaded and filled in here.

The folder is the repository's `assets/prompts`, or `$HOLODESK_PROMPTS_DIR` when set (a user's own
prompts, or an install where the assets live elsewhere). Templates use `${name}` placeholders
(`$$` for a literal dollar sign); a profile says which names it fills, and a template asking for
any other is refused when the profile is created, not halfway through a run.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from string import Template

from holodesk.inference.errors import InferenceError

PROMPTS_DIR_ENV = "HOLODESK_PROMPTS_DIR"


class PromptError(InferenceError):
    """A prompt file is missing or unusable; the message names the file and what to do."""


def default_prompts_dir() -> Path:
    override = os.environ.get(PROMPTS_DIR_ENV)
    if override:
        return Path(override).expanduser()
    # inference/profiles/prompts.py -> repository root -> assets/prompts
    return Path(__file__).resolve().parents[2] / "assets" / "prompts"


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """One prompt file's text, with the placeholders the profile will fill."""

    name: str
    path: Path
    text: str
    placeholders: frozenset[str]

    def render(self, **values: object) -> str:
        missing = self.placeholders - set(values)
        if missing:
            raise PromptError(f"prompt {self.path} needs values for: {', '.join(sorted(missing))}")
        return Template(self.text).substitute({key: str(value) for key, value in values.items()})


def load_prompt(name: str, provides: Collection[str] = (), directory: Path | None = None) -> PromptTemplate:
    """Read `<directory>/<name>.txt`; its placeholders must be among `provides`."""
    folder = directory if directory is not None else default_prompts_dir()
    path = folder / f"{name}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptError(
            f"prompt file {path} is missing: restore assets/prompts/{name}.txt from the Holodesk"
            f" sources, or point {PROMPTS_DIR_ENV} at a folder that has it"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PromptError(f"prompt file {path} cannot be read: {exc}") from None
    template = Template(text)
    if not template.is_valid():
        raise PromptError(f"prompt file {path} has a stray '$' (write $$ for a dollar sign)")
    placeholders = frozenset(template.get_identifiers())
    unknown = placeholders - set(provides)
    if unknown:
        offered = ", ".join(f"${{{key}}}" for key in sorted(provides)) or "none"
        raise PromptError(
            f"prompt file {path} uses {', '.join(sorted(unknown))}, which this profile does not fill"
            f" (it fills: {offered})"
        )
    if not text.strip():
        raise PromptError(f"prompt file {path} is empty")
    return PromptTemplate(name=name, path=path, text=text, placeholders=placeholders)
