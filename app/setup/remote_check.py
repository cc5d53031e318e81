"""The first-run choice of a model server elsewhere: the URL checked on the spot, by asking the server.

What the person typed is read as the settings read a server URL (`normalize_server_url`: "gpu-box:8000"
is http://gpu-box:8000/v1), then the server is asked once for its models (GET /models, the remote
backend's own check). A URL that cannot be one, a server that does not answer, refuses the key or serves
several models is a SetupError naming the fix; nothing is saved until the server answered.
"""

from __future__ import annotations

from dataclasses import dataclass

from holodesk.app.common.settings_checks import normalize_server_url
from holodesk.app.setup.errors import SetupError
from holodesk.inference.profiles import closest_profile, model_family
from holodesk.inference.remote import RemoteBackend

EXAMPLE = "http://gpu-box:8000/v1"


@dataclass(frozen=True, slots=True)
class ServerChoice:
    base_url: str
    model: str  # the model the server serves
    profile: str  # the profile for that model: its family's, else the one already set


def check_server_url(text: str, current_profile: str, connect_timeout_s: float = 5.0) -> ServerChoice:
    """Ask the server at `text` what it serves. SetupError in words (what is wrong, what to do) otherwise."""
    if not text.strip():
        raise SetupError(f"type the server's URL first, such as {EXAMPLE}")
    try:
        url = normalize_server_url(text)
    except ValueError as exc:
        raise SetupError(f"{exc}. Type the URL of an OpenAI-compatible server, such as {EXAMPLE}") from None
    check = RemoteBackend(url, connect_timeout_s=connect_timeout_s, read_timeout_s=10.0).check_server()
    if not check.reachable:
        raise SetupError(
            f"{check.problem} Correct the URL, or start the model server there (docs/remote-server.md gives the"
            " vLLM command)"
        )
    if check.problem is not None or check.model is None:
        raise SetupError(f"the server at {url} cannot be used as it is: {check.problem}")
    profile = model_family(check.model) or closest_profile(check.model) or current_profile
    return ServerChoice(url, check.model, profile)
