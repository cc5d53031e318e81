"""The fixed choices of a command line flag or a setting (backend, device, profile), with no imports.

`holodesk --help` and `--version` must start fast (issue 33: <= 0.3 s), so the parser reads its choices
from here instead of from the settings module, which imports the engine, the checkpoint code and numpy.
The profile names are the inference package's (`holodesk.inference.profiles.PROFILE_NAMES`, whose
module imports PIL and numpy); tests/app/test_cli_startup.py checks the two lists stay the same.
"""

from __future__ import annotations

BACKENDS = ("local", "remote", "scripted")
DEVICES = ("cuda", "cpu")
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
DEFAULT_PROFILE = "holotron"
# The profiles whose family the in-process engine runs (`Profile.runs_in_process`: Holotron-12B's and
# Holotron-3-Nano's architectures, and Qwen3.5's: H Company's Holo3, Holo3.1 and Holo4); the others need a
# model server.
# tests/app/cli/test_cli_startup.py checks they agree.
IN_PROCESS_PROFILES: tuple[str, ...] = ("holotron", "holotron3-nano", "holo4", "holo3.1", "holo3.1-tools", "holo3")


def local_profile_problem(profile: str) -> str:
    """Why the in-process backend cannot take `profile` (one that IN_PROCESS_PROFILES lacks)."""
    return (
        f"the {profile} profile cannot run in the in-process backend (model.backend = 'local'), which runs"
        " Holotron-12B, Holotron-3-Nano (Nemotron-H) and Qwen3.5 (Holo3, Holo3.1, Holo4) checkpoints only: serve"
        " the model with"
        " vLLM and use the remote backend"
        " (`holodesk doctor --backend remote --base-url URL` names the vLLM command a served model needs),"
        " or choose the holotron profile"
    )
