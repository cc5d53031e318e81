"""Backend and configuration failures in words: what happened, and what to do about it.

The tray app and the command line both say it the same way. The inference layer's messages already
say what happened; this adds the step the user can take, chosen by the kind of failure. Kinds are
matched by class name along the exception's class hierarchy, because the remote backend's error
classes are moving between modules (inference/remote.py, inference/errors.py) and the words must
not depend on where they live.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Protocol, runtime_checkable

from holodesk.inference.errors import ModelLoadError

START_SERVER = (
    "Start the model server (for example `vllm serve Hcompany/Holotron-12B --trust-remote-code`; docs/remote-server.md "
    "gives the full command), "
    "or correct the server URL in the settings (or --base-url)."
)
# Each profile's model as H Company publishes it, for the start-the-server advice: a holo4 user must not
# be told to serve Holotron-12B.
PROFILE_MODELS = {
    "holo3": "Hcompany/Holo3-35B-A3B",
    "holo3.1": "Hcompany/Holo-3.1-35B-A3B",
    "holo3.1-tools": "Hcompany/Holo-3.1-35B-A3B",
    "holo4": "Hcompany/Holo4-35B-A3B-FP8",
    "holotron3-nano": "Hcompany/Holotron-3-Nano",
}


def start_server_advice(profile: str | None = None) -> str:
    """What to do when the server does not answer, with the vLLM command for the profile's own model."""
    if profile is None or profile == "holotron":
        return START_SERVER
    model = PROFILE_MODELS.get(profile)
    if model is None:  # holo1, holo1.5: no command of their own here
        return (
            f"Start the model server that serves your {profile} model (docs/remote-server.md), "
            "or correct the server URL in the settings (or --base-url)."
        )
    from holodesk.app.cli.server_checks import vllm_command_for  # the one place the commands are written

    command = vllm_command_for(model, profile)
    return (
        f"Start the model server (for the {profile} profile, for example `{command}`; "
        "docs/remote-server.md gives the details), or correct the server URL in the settings (or --base-url)."
    )


TLS_ADVICE = (
    "The URL says https:// but the server may speak plain HTTP (try http://), or its certificate is "
    "not trusted by this computer."
)
URL_ADVICE = "Use the server's API root as the URL; for vLLM it ends in /v1 (for example http://gpu-box:8000/v1)."
KEY_ADVICE = "Set the server's API key in the settings (it is kept in the system keyring) or in HOLODESK_API_KEY."
BUSY_ADVICE = "The server is up but failing or overloaded: look at its log, or try again in a moment."

# Class name -> what to do. The first name found along the class hierarchy wins.
_ADVICE_BY_KIND = {
    "AuthenticationError": KEY_ADVICE,
    # These three say what to change in their own message (the server flag).
    "ServerCrashedError": "",
    "ContextLengthError": "",
    "TooManyImagesError": "",
    "ModelNotFoundError": "Choose a model the server serves (the settings' Model field, or --model).",
    "AmbiguousModelError": "Name the model to use (the settings' Model field, or --model).",
    "ServerError": BUSY_ADVICE,
    "ServerTimeoutError": BUSY_ADVICE,
    "MalformedResponseError": "Check that the URL points to an OpenAI-compatible server (such as vLLM). " + URL_ADVICE,
    "ModelLoadError": "Check the model path in the settings (or --model); `holodesk doctor` shows what is missing.",
}


class ServerCheckLike(Protocol):
    """The fields of inference.remote.ServerCheck this module reads."""

    reachable: bool
    authenticated: bool | None
    problem: str | None
    model: str | None
    model_listed: bool


@runtime_checkable
class ChecksServer(Protocol):
    """A backend that can be asked, before a run, whether its server can serve (the remote backend)."""

    def check_server(self) -> ServerCheckLike: ...


@runtime_checkable
class _WithStatus(Protocol):
    """An error that carries the HTTP status it came with (the remote backend's errors)."""

    status: int | None


def advice_for(
    problem: str,
    kind: str | None = None,
    *,
    reachable: bool = True,
    status: int | None = None,
    profile: str | None = None,
) -> str:
    """What to do about a failure, from its message, its kind (class name) and what is known of it;
    `profile` (the model profile in use) chooses the server command a down server's advice names."""
    lowered = problem.lower()
    if "tls" in lowered or "ssl" in lowered or "certificate" in lowered:
        return TLS_ADVICE
    if not reachable or kind == "ServerUnreachableError":
        return start_server_advice(profile)
    if status in (401, 403) or "api key" in lowered:
        return "" if "to set one" in lowered else KEY_ADVICE  # the backend already said where keys go
    if kind is not None and kind in _ADVICE_BY_KIND:
        return _ADVICE_BY_KIND[kind]
    # "404" as a word: a URL's port (":40425") is not a 404 page.
    if status == 404 or "does not exist" in lowered or re.search(r"(?<![\d:])404(?!\d)", lowered):
        return URL_ADVICE
    return ""


def _kind(exc: BaseException) -> str | None:
    for cls in type(exc).__mro__:
        if cls.__name__ in _ADVICE_BY_KIND or cls.__name__ == "ServerUnreachableError":
            return cls.__name__
    return None


def in_words(exc: BaseException, profile: str | None = None) -> str:
    """An exception from building or running a backend as two sentences: what happened, what to do."""
    what = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ModelLoadError):
        return what  # its messages already end with the fix
    status = exc.status if isinstance(exc, _WithStatus) and isinstance(exc.status, int) else None
    advice = advice_for(what, _kind(exc), status=status, profile=profile)
    return _joined(what, advice)


def check_in_words(check: ServerCheckLike, profile: str | None = None) -> str | None:
    """A server check's problem in words, or None when the server is ready."""
    if check.problem is None:
        return None
    kind = "ModelNotFoundError" if check.model and not check.model_listed else None
    status = 401 if check.authenticated is False else None
    advice = advice_for(check.problem, kind, reachable=check.reachable, status=status, profile=profile)
    return _joined(check.problem.strip(), advice)


def _joined(what: str, advice: str) -> str:
    if not advice or advice in what:
        return what
    return f"{what.rstrip()}{'' if what.rstrip().endswith(('.', '?', '!')) else '.'} {advice}"


def preflight(backend: object, profile: str | None = None) -> str | None:
    """Ask a remote backend whether it can serve before a run starts: a problem in words, or None.

    Backends without a server (local, scripted) have nothing to check here. `profile`: the model
    profile the run uses, whose model a down server's advice names.
    """
    if not isinstance(backend, ChecksServer):
        return None
    return check_in_words(backend.check_server(), profile)


# Advice transformers prints that Holodesk's pinned version forbids following.
_UPGRADE_ADVICE = re.compile(
    r"[^.\n]*(upgrade transformers|pip install -U transformers|--upgrade transformers)[^.\n]*\.?", re.I
)
NO_GPU_WORDS = ("cuda", "gpu", "no nvidia", "mamba", "torch cannot be imported")
REMOTE_OFFER = (
    "No suitable GPU here? Run the model on a server with one (vLLM) and choose the remote backend "
    "with its URL in Settings; this computer then needs no GPU and no 25 GB download."
)
NO_GPU_HERE = (
    "This computer has no NVIDIA GPU that Holodesk can use, so the model cannot run here (and its 25 GB "
    "download would not help). Run it on a server with a GPU (vLLM) and choose Settings → Backend: remote "
    "with the server's URL."
)

# The same, for `holodesk run` and `locate`, whose user picks the backend with flags.
NO_GPU_HERE_TERMINAL = (
    "This computer has no NVIDIA GPU that Holodesk can use, so the local backend cannot run the model here "
    "(and its 25 GB download would not help). Run it on a server with a GPU (vLLM) and use the remote "
    "backend: --backend remote --base-url http://SERVER:8000/v1 (or choose it once in the tray's Settings)."
)


def gpu_missing() -> bool:
    """True when the local model surely cannot run here: no torch, or (on Linux) no NVIDIA GPU at all.

    Cheap on purpose (no torch import, which takes seconds): it only picks the balloon's words.
    """
    if importlib.util.find_spec("torch") is None:
        return True
    if sys.platform.startswith("linux"):
        return not any(Path("/proc/driver/nvidia/gpus").glob("*"))
    return False  # elsewhere we cannot tell cheaply; the reason itself is shown


def load_failure_in_words(reason: str, backend: str, no_gpu: bool = False) -> str:
    """The tray's "model not available" text: the reason, what to do, and the remote server as a way out.

    `no_gpu`: the local backend failed on a computer without a usable GPU; then the server is the
    answer, not the download the reason may suggest.
    """
    text = _UPGRADE_ADVICE.sub("", reason).strip()
    if text != reason.strip():
        text += " Holodesk needs the transformers version it installed (5.19.0); do not upgrade it."
    if backend != "local":
        return text
    if no_gpu:
        return NO_GPU_HERE
    if any(word in reason.lower() for word in NO_GPU_WORDS):
        return f"{text}\n{REMOTE_OFFER}"
    return f"{text}\nRun `holodesk doctor` to see what is missing, or use a model server (Settings, remote)."


UNUSABLE_ANSWER = "the model's answer was unusable"
UNUSABLE_HINT = (
    "The model did not answer in the form its profile reads. If this repeats, check that Settings → Model "
    "profile (--profile) matches the model the server runs; otherwise run the task again."
)


def run_end_hint(detail: str) -> str:
    """What to do after a run ended as `detail` says, or "" when the detail says it already."""
    return UNUSABLE_HINT if detail.startswith(UNUSABLE_ANSWER) else ""
