"""`holodesk setup`: the terminal conversation that chooses, downloads and sets a model.

Without --model it shows the models that fit this computer (recommended first, with the download's
size and a step's time measured here) and asks which; with --yes it takes the recommended one (or the
--model given) and asks nothing. Then it says what the hub lists (commit, size, licence, gating),
downloads with progress, and writes the settings only once the model is whole and verified.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from holodesk.app.cli.model_fit import total_memory_bytes
from holodesk.app.setup.catalog import CATALOG, find_model, offers
from holodesk.app.setup.choose import save_choice
from holodesk.app.setup.errors import SetupError
from holodesk.app.setup.hub_listing import gated_words, list_repo
from holodesk.app.setup.progress_line import ProgressLine, format_line
from holodesk.app.setup.step_estimate import estimate_words, measure, step_seconds
from holodesk.inference.checkpoint import looks_like_repo_id
from holodesk.inference.hardware import cuda_devices
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


@dataclass(frozen=True, slots=True)
class _Target:
    repo_id: str
    profile: str
    device: str


ENGINE_MISSING = (
    "holodesk setup downloads a model for Holodesk's own engine, which is not installed here ({missing} is"
    " missing): install it with pip install 'holodesk[holotron]' (PyTorch, transformers and the Hugging Face"
    " client), or use a model on a server elsewhere (docs/remote-server.md)"
)


def run_setup(request: SetupRequest, stdin: TextIO, out: TextIO, err: TextIO) -> int:
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


def _choose(request: SetupRequest, stdin: TextIO, out: TextIO) -> _Target | None:
    if request.model is not None:
        known = find_model(request.model)
        if known is not None:
            return _Target(known.repo_id, request.profile or known.profile, _device_for(known.name))
        if not looks_like_repo_id(request.model):
            raise SetupError(
                f"--model {request.model!r} is neither one of {_keys()} nor a Hugging Face repository id (owner/name)"
            )
        profile = request.profile or _family(request.model)
        return _Target(request.model, profile, "cuda" if _gpus() else "cpu")
    return _choose_from_offers(request, stdin, out)


def _choose_from_offers(request: SetupRequest, stdin: TextIO, out: TextIO) -> _Target | None:
    found = offers(total_memory_bytes(), _gpus())
    out.write("Models for this computer (measuring its speed...)\n")
    for number, offer in enumerate(found, 1):
        width = int(offer.fit.model.config["text_config"]["hidden_size"])
        estimate = estimate_words(step_seconds(offer.fit.plan, measure(width, offer.device)), offer.device)
        mark = "recommended" if offer.recommended else ("fits" if offer.fits else "does not fit")
        out.write(
            f"  {number}. {offer.model.name} ({offer.model.repo_id}) on the {offer.device.upper()}: {mark},"
            f" {offer.need_words()}, about {_mb(offer.fit.plan.weights)} to download, {estimate}\n"
        )
    out.write("  A model on a server elsewhere: holodesk --backend remote --base-url URL (docs/remote-server.md)\n")
    pick = next((o for o in found if o.recommended), None)
    if request.yes:
        if pick is None:
            raise SetupError("no model fits this computer's memory: use a server elsewhere (docs/remote-server.md)")
    else:
        default = found.index(pick) + 1 if pick else 1
        out.write(f"Which one? [{default}] ")
        out.flush()
        answer = stdin.readline().strip()
        if answer.lower() in ("q", "n", "no"):
            return None
        try:
            pick = found[int(answer) - 1] if answer else found[default - 1]
        except (ValueError, IndexError):
            raise SetupError(f"{answer!r} is not one of the numbers 1 to {len(found)}; nothing changed") from None
    return _Target(pick.model.repo_id, request.profile or pick.model.profile, pick.device)


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
    return ", ".join(m.key for m in CATALOG)


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


def main_for_cli(model: str | None, profile: str | None, revision: str | None, device: str | None, yes: bool) -> int:
    return run_setup(SetupRequest(model, profile, revision, device, yes), sys.stdin, sys.stdout, sys.stderr)
