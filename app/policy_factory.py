"""Build the policy the user asked for: a profile plus the local, remote or scripted backend."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from inference.model_policy import ModelPolicy

BACKENDS = ("local", "remote", "scripted")


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """What the command line or the settings say about where the model runs."""

    backend: str = "local"
    profile: str = "holotron"
    model: str | None = None  # local: checkpoint directory or repo id; remote: served model name
    base_url: str | None = None
    device: str = "cuda"
    script: Path | None = None  # scripted: JSONL of model answers


class PolicyConfigError(ValueError):
    """The options do not describe a policy that can be built (missing URL, unknown backend...)."""


def build_policy(options: PolicyOptions, progress_out: TextIO | None = sys.stderr) -> ModelPolicy:
    """A ready ModelPolicy. The local backend is loaded here (off-thread, progress on `progress_out`)."""
    from inference.errors import InferenceError
    from inference.profiles import get_profile

    try:
        profile = get_profile(options.profile)
    except (ValueError, InferenceError) as exc:  # unknown name, missing or broken prompt file
        raise PolicyConfigError(str(exc)) from None
    if options.backend == "local":
        from inference.local import LoadProgress, LocalBackend

        backend = LocalBackend(options.model, device=options.device, max_tiles=profile.budget.max_tiles)

        def report(progress: LoadProgress) -> None:
            if progress_out is not None:
                progress_out.write(f"\rloading model: {progress.fraction:4.0%} {progress.message[:70]:<70}")
                progress_out.flush()

        backend.load_async(report).result()
        if progress_out is not None:
            progress_out.write("\n")
            if backend.slow_path_warning:
                progress_out.write(f"warning: {backend.slow_path_warning}\n")
        return ModelPolicy(profile, backend)
    if options.backend == "remote":
        if not options.base_url:
            raise PolicyConfigError("the remote backend needs --base-url (for example http://gpu-box:8000/v1)")
        from inference.remote import RemoteBackend

        return ModelPolicy(profile, RemoteBackend(options.base_url, model=options.model))
    if options.backend == "scripted":
        if options.script is None:
            raise PolicyConfigError("the scripted backend needs --script FILE (JSONL of model answers)")
        from inference.scripted import ScriptedBackend

        return ModelPolicy(profile, ScriptedBackend.from_file(options.script))
    raise PolicyConfigError(f"unknown backend {options.backend!r} (expected one of: {', '.join(BACKENDS)})")
