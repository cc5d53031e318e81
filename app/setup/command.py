"""`holodesk setup`: the terminal conversation that chooses, downloads and sets a model, or sets a server.

Without --model it numbers the first-run window's own choices (`choices.measured_choices`: the models
that fit this computer, the recommended one first, with the download's size and a step's time measured
here; Holotron-12B on a GPU; a model server elsewhere) and asks which; with --yes it takes the first
that can be chosen (or the --model given) and asks nothing. Then it says what the hub lists (commit,
size, licence, gating), downloads with progress, and writes the settings only once the model is whole
and verified. With --server URL (or the server's number and its URL typed) it asks that server which
model it serves, as the window does, and writes the settings only once it answered.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from holodesk.app.common.settings import load_settings
from holodesk.app.setup.catalog import CATALOG, HOLOTRON_12B, find_model, is_gpu_model, offers
from holodesk.app.setup.choices import Choice, holotron_fits, holotron_gpu_words, measured_choices
from holodesk.app.setup.choose import save_choice, save_remote_choice
from holodesk.app.setup.errors import SetupError
from holodesk.app.setup.hub_listing import gated_words, list_repo
from holodesk.app.setup.progress_line import ProgressLine, format_line
from holodesk.app.setup.remote_check import EXAMPLE, check_server_url
from holodesk.inference.checkpoint import looks_like_repo_id
from holodesk.inference.hardware import cuda_devices
from holodesk.inference.memory_guide import gib_text
from holodesk.inference.profiles import model_family

if TYPE_CHECKING:
    from holodesk.app.setup.hub_download import Progress
    from holodesk.app.setup.hub_listing import RepoListing
    from holodesk.inference.hardware import CudaDevice

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_CANCELLED = 130


@dataclass(frozen=True, slots=True)
class SetupRequest:
    model: str | None
    profile: str | None
    revision: str | None
    device: str | None
    yes: bool
    models_root: Path | None = None
    server: str | None = None  # --server URL: a model server elsewhere instead of a download


@dataclass(frozen=True, slots=True)
class _Target:
    repo_id: str
    profile: str
    device: str


@dataclass(frozen=True, slots=True)
class _Server:
    url: str  # as the person typed it: checked by asking the server


USE_A_SERVER = "holodesk setup --server URL (a vLLM or other OpenAI-compatible server; docs/remote-server.md)"


ENGINE_MISSING = (
    "holodesk setup downloads a model for Holodesk's own engine, which is not installed here ({missing} is"
    " missing): install it with pip install 'holodesk[holotron]' (PyTorch, transformers and the Hugging Face"
    " client), or use a model on a server elsewhere: " + USE_A_SERVER
)


def run_setup(request: SetupRequest, stdin: TextIO, out: TextIO, err: TextIO) -> int:
    if request.server is not None:  # needs no engine: the server runs the model
        return _run_for_server(_Server(request.server), request, out, err)
    try:
        import huggingface_hub  # noqa: F401 - the download's client
        import torch  # noqa: F401 - the engine the model runs in, and the step's measurement
    except ImportError as exc:
        err.write(f"holodesk setup: {ENGINE_MISSING.format(missing=exc.name or exc)}; nothing changed.\n")
        return EXIT_FAILED
    # heavy: huggingface-hub
    from holodesk.app.setup.hub_download import default_models_root, download, staging_folder

    root = request.models_root or default_models_root()
    listing: RepoListing | None = None
    if threading.current_thread() is threading.main_thread():
        # Ctrl+C cancels, and is how the first-run window's Cancel reaches this command, even when it was
        # started with SIGINT ignored (what a program started in the background by a non-interactive shell
        # inherits, and passes on to the commands it starts): Python then installs no handler of its own.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        target = _choose(request, stdin, out)
        if target is None:
            out.write("Nothing chosen; nothing changed.\n")
            return EXIT_CANCELLED
        if isinstance(target, _Server):
            return _run_for_server(target, request, out, err)
        listing = list_repo(target.repo_id, request.revision)
        out.write(
            f"{listing.repo_id} at {listing.commit[:12]}: {len(listing.files)} files, {_mb(listing.total_bytes)};"
            f" {listing.licence_words()}.\n"
        )
        if listing.gated:
            out.write(f"Note: {gated_words(listing)}.\n")
        if not request.yes and not _confirm(stdin, out, f"Download it into {root}?"):
            out.write("Not downloaded; nothing changed.\n")
            return EXIT_CANCELLED
        folder = download(listing, root, _progress_view(err))
        if threading.current_thread() is threading.main_thread():
            # From here the choice is made: a Ctrl+C (the window's Cancel, sent as the download ended)
            # must not say "the settings are unchanged" after they were saved, nor cut the save short.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        settings_file = save_choice(folder, target.profile, request.device or target.device)
    except SetupError as exc:
        err.write(f"holodesk setup: {exc}\n")
        return EXIT_FAILED
    except KeyboardInterrupt:
        kept = f" (what was downloaded is kept in {staging_folder(root, listing)} and resumes)" if listing else ""
        err.write(f"\nholodesk setup: cancelled{kept}; the settings are unchanged.\n")
        return EXIT_CANCELLED
    out.write(
        f"Ready: {folder}\nSettings: {settings_file} now use it ({target.profile} profile, on the"
        f" {(request.device or target.device).upper()}). Start Holodesk with `holodesk`, or try"
        " `holodesk doctor --try`. The first step is slower while the model loads.\n"
    )
    return EXIT_OK


def _run_for_server(server: _Server, request: SetupRequest, out: TextIO, err: TextIO) -> int:
    """Ask the server which model it serves, as the first-run window does; the settings change once it answered."""
    try:
        flags = (("--model", request.model), ("--revision", request.revision), ("--device", request.device))
        given = [flag for flag, value in flags if value is not None]
        if request.server is not None and given:
            raise SetupError(f"--server takes no {' or '.join(given)}: the server says which model it serves")
        out.write(f"Asking the server at {server.url.strip()} which model it serves...\n")
        out.flush()
        answer = check_server_url(server.url, request.profile or load_settings().settings.model.profile)
        profile = request.profile or answer.profile
        settings_file = save_remote_choice(answer.base_url, answer.model, profile)
    except SetupError as exc:
        err.write(f"holodesk setup: {exc}; the settings are unchanged.\n")
        return EXIT_FAILED
    out.write(
        f"Ready: the server at {answer.base_url} serves {answer.model} ({profile} profile).\nSettings:"
        f" {settings_file} now use it. Start Holodesk with `holodesk`, or try `holodesk doctor --try`.\n"
    )
    return EXIT_OK


def _choose(request: SetupRequest, stdin: TextIO, out: TextIO) -> _Target | _Server | None:
    if request.model is not None:
        if is_gpu_model(request.model, HOLOTRON_12B):
            return _holotron_target(request)
        known = find_model(request.model)
        if known is not None:
            return _Target(known.repo_id, request.profile or known.profile, _device_for(known.name))
        if not looks_like_repo_id(request.model):
            raise SetupError(
                f"--model {request.model!r} is neither one of {_keys()} nor a Hugging Face repository id (owner/name)"
            )
        profile = request.profile or _family(request.model)
        return _Target(request.model, profile, "cuda" if _gpus() else "cpu")
    return _choose_from_list(request, stdin, out)


def _holotron_target(request: SetupRequest) -> _Target:
    """Holotron-12B by name: only on a GPU that holds it, as the window offers it."""
    model = HOLOTRON_12B
    if request.device == "cpu":
        raise SetupError(
            f"{model.name} runs on a GPU only (a step takes minutes on a CPU), so it is not set up for the CPU;"
            f" nothing changed. Use a server elsewhere that runs it: {USE_A_SERVER}; or a model for this CPU:"
            " holodesk setup"
        )
    gpus = _gpus()
    if not holotron_fits(gpus):
        raise SetupError(
            f"{model.name} needs an NVIDIA GPU of {gib_text(model.gpu_bytes)} ({holotron_gpu_words(gpus)});"
            f" nothing changed. Use a server elsewhere that runs it: {USE_A_SERVER}; or a model that fits this"
            " computer: holodesk setup"
        )
    return _Target(model.repo_id, request.profile or model.profile, "cuda")


def _choose_from_list(request: SetupRequest, stdin: TextIO, out: TextIO) -> _Target | _Server | None:
    out.write("Choices for this computer (measuring its speed...)\n")
    out.flush()
    choices = measured_choices()
    for number, choice in enumerate(choices, 1):
        head, _, detail = choice.label.partition("\n")
        repo = f": {choice.model}" if choice.model else ""
        out.write(f"  {number}. {head}{repo}\n     {detail.strip()}\n")
    # The window's first selectable line is its default: the same here.
    default = next((n for n, c in enumerate(choices, 1) if c.enabled), 1)
    if request.yes:
        if choices[default - 1].is_server:
            raise SetupError(f"no model fits this computer's memory: use a server elsewhere, {USE_A_SERVER}")
        number = default
    else:
        out.write(f"Which one? [{default}] ")
        out.flush()
        answer = stdin.readline().strip()
        if answer.lower() in ("q", "n", "no"):
            return None
        try:
            number = int(answer) if answer else default
        except ValueError:
            number = 0
        if not 1 <= number <= len(choices):
            raise SetupError(f"{answer!r} is not one of the numbers 1 to {len(choices)}; nothing changed")
    return _target_of(choices[number - 1], number, request, stdin, out)


def _target_of(choice: Choice, number: int, request: SetupRequest, stdin: TextIO, out: TextIO) -> _Target | _Server:
    head = choice.label.partition("\n")[0]
    if not choice.enabled:
        raise SetupError(
            f"choice {number} cannot be chosen on this computer: {head}; nothing changed. Choose another, or a server"
            f" elsewhere: {USE_A_SERVER}"
        )
    if is_gpu_model(choice.model, HOLOTRON_12B):
        return _holotron_target(request)  # its own rule: a GPU that holds it, whatever --device says
    if choice.is_server:
        out.write(f"The server's URL (such as {EXAMPLE}): ")
        out.flush()
        return _Server(stdin.readline())
    known = find_model(choice.model)
    profile = request.profile or choice.profile or (known.profile if known else _family(choice.model))
    return _Target(choice.model, profile, choice.device)


def _device_for(name: str) -> str:
    gpus = _gpus()
    return next((o.device for o in offers(None, gpus) if o.model.name == name), "cpu")


def _family(repo_id: str) -> str:
    family = model_family(repo_id)
    if family is None:
        raise SetupError(f"which profile does {repo_id} use? Say it with --profile (holo3.1, holo4, ...)")
    return family


def _gpus() -> tuple[CudaDevice, ...]:
    return cuda_devices()[0]


def _keys() -> str:
    return ", ".join([*(m.key for m in CATALOG), HOLOTRON_12B.key])


def _confirm(stdin: TextIO, out: TextIO, question: str) -> bool:
    out.write(f"{question} [y/N] ")
    out.flush()
    return stdin.readline().strip().lower() in ("y", "yes")


def _mb(num_bytes: int) -> str:
    return f"{num_bytes / 1e9:.1f} GB" if num_bytes >= 1e9 else f"{num_bytes / 1e6:.1f} MB"


class _TerminalProgress:
    """A tqdm bar on a terminal; plain lines (bytes, rate, time left) at most once a second otherwise."""

    def __init__(self, err: TextIO) -> None:
        self._err = err
        self._bar: object | None = None
        self._start: tuple[float, int] | None = None
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        if self._err.isatty():
            self._tty(p)
            return
        now = time.monotonic()
        if self._start is None:
            self._start = (now, p.done)
        if p.done < p.total and now - self._last < 1.0:
            return
        self._last = now
        began, first = self._start
        rate = (p.done - first) / (now - began) if now > began else 0.0
        left = round((p.total - p.done) / rate) if rate > 0 else None
        line = ProgressLine(p.file or "starting", p.done, p.total, rate / 1e6, left)
        self._err.write(format_line(line) + "\n")
        self._err.flush()

    def _tty(self, p: Progress) -> None:
        from tqdm import tqdm

        bar = self._bar
        if not isinstance(bar, tqdm):
            bar = tqdm(total=p.total, initial=p.done, unit="B", unit_scale=True, file=self._err, desc="download")
            self._bar = bar
        bar.set_postfix_str(p.file, refresh=False)
        bar.update(p.done - bar.n)
        if p.done >= p.total:
            bar.close()


def _progress_view(err: TextIO) -> _TerminalProgress:
    """The terminal's view of the download's progress."""
    return _TerminalProgress(err)


def main_for_cli(
    model: str | None, profile: str | None, revision: str | None, device: str | None, yes: bool, server: str | None
) -> int:
    request = SetupRequest(model, profile, revision, device, yes, server=server)
    return run_setup(request, sys.stdin, sys.stdout, sys.stderr)
