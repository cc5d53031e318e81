"""Build the policy the user asked for: a profile plus the local, remote or scripted backend."""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from holodesk.app.common.choices import BACKENDS, local_profile_problem
from holodesk.app.common.errors import HolodeskAppError
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy
from holodesk.inference.profiles import get_profile
from holodesk.inference.secrets import find_api_key

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PolicyOptions:
    """Where the model runs, as the settings (with any command-line flags) say: `Settings.to_policy_options()`.

    No defaults here: they are written once, in holodesk.app.common.settings.
    """

    backend: str
    profile: str
    model: str | None  # local: checkpoint directory or repo id; remote: served model name
    base_url: str | None
    device: str
    script: Path | None  # scripted: JSONL of model answers
    screenshot_window: str  # local: "trained" (the last 3, sliding) or "block" (see inference.local.block_window)


class PolicyConfigError(HolodeskAppError, ValueError):
    """The options do not describe a policy that can be built (missing URL, unknown backend...)."""


ProgressCallback = Callable[[float, str], None]  # fraction 0..1, message for people


def plain_http_key_warning(options: PolicyOptions) -> str | None:
    """A warning when the remote backend would send an API key unencrypted to another machine, else None.

    Plain http is fine on this machine (localhost, 127.0.0.0/8, ::1); anywhere else anyone on the
    network path can read the key (and the screenshots) from the traffic.
    """
    if options.backend != "remote" or not options.base_url:
        return None
    try:
        parts = urlsplit(options.base_url)
        host = parts.hostname
    except ValueError:
        return None  # a malformed URL is reported by the backend itself
    if parts.scheme != "http" or not host or _is_loopback(host):
        return None

    lookup = find_api_key(options.base_url)
    if lookup.key is None:
        return None
    return (
        f"the API key (from {lookup.source}) will be sent unencrypted over plain http to {host}: anyone on the "
        "network path can read it and your screenshots; use an https:// URL (or an SSH tunnel to localhost)"
    )


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build_policy(options: PolicyOptions, progress: ProgressCallback | None = None) -> ModelPolicy:
    """A ready ModelPolicy. The local backend is loaded here (off-thread, reporting through `progress`)."""

    try:
        profile = get_profile(options.profile)
        if options.backend == "local" and options.screenshot_window == "block":
            # start-up: `holodesk run` loads only the chosen backend's modules (bench/startup.py)
            from holodesk.inference.local import block_window

            profile = get_profile(options.profile, budget=block_window(profile.budget))
    except (ValueError, InferenceError) as exc:  # unknown name, missing or broken prompt file
        raise PolicyConfigError(str(exc)) from None
    if options.backend == "local" and not profile.runs_in_process:
        # Refused before any weight is read: the engine would be prompted in another family's format.
        raise PolicyConfigError(local_profile_problem(profile.name))
    if options.backend == "local":
        # start-up: `holodesk run` loads only the chosen backend's modules (bench/startup.py)
        from holodesk.inference.local import LoadProgress, LocalBackend

        backend = LocalBackend(
            options.model, device=options.device, max_tiles=profile.budget.max_tiles, profile=profile.name
        )

        def report(step: LoadProgress) -> None:
            if progress is not None:
                progress(step.fraction, step.message)

        backend.load_async(report).result()
        if backend.load_notice:
            log.warning("%s", backend.load_notice)
        return ModelPolicy(profile, backend)
    if options.backend == "remote":
        if not options.base_url:
            raise PolicyConfigError("the remote backend needs --base-url (for example http://gpu-box:8000/v1)")
        # start-up: `holodesk run` loads only the chosen backend's modules (bench/startup.py)
        from holodesk.inference.remote import RemoteBackend

        return ModelPolicy(profile, RemoteBackend(options.base_url, model=options.model))
    if options.backend == "scripted":
        if options.script is None:
            raise PolicyConfigError("the scripted backend needs --script FILE (JSONL of model answers)")
        # start-up: `holodesk run` loads only the chosen backend's modules (bench/startup.py)
        from holodesk.inference.scripted import ScriptedBackend

        return ModelPolicy(profile, ScriptedBackend.from_file(options.script))
    raise PolicyConfigError(f"unknown backend {options.backend!r} (expected one of: {', '.join(BACKENDS)})")
