"""The first-run choices, one list for the tray's window and for `holodesk setup` in a terminal.

The catalogue's models as they fit this computer (`catalog.offers`, each with a step's time measured
here), Holotron-12B on a GPU (first where a GPU of 32 GiB holds it, not selectable otherwise, with why),
then a model server elsewhere. The window shows each label as a line of its list; the terminal numbers
them. What is enabled is what either of them lets a person choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from holodesk.app.cli.model_fit import total_memory_bytes
from holodesk.app.setup.catalog import HOLOTRON_12B, Offer, offers
from holodesk.app.setup.step_estimate import estimate_words, measure, step_seconds
from holodesk.inference.hardware import CudaDevice, cuda_devices
from holodesk.inference.memory_guide import DESKTOP_RESERVE, gib_text


@dataclass(frozen=True, slots=True)
class Choice:
    """One choice: what it says (two lines), and what `holodesk setup` is given for it."""

    label: str
    model: str  # the repository id; "" for a server elsewhere
    device: str  # "cpu" or "cuda"
    enabled: bool
    profile: str | None = None  # given to `holodesk setup` where the catalogue does not know the model

    @property
    def is_server(self) -> bool:
        return not self.model


SERVER_CHOICE = Choice(
    "A model server elsewhere (vLLM or another OpenAI-compatible server)\n    Type its URL below: it is checked now",
    "",
    "",
    True,
)


def measured_choices() -> list[Choice]:
    """The catalogue's offers for this computer, each with a step's time measured here (a few seconds), then
    Holotron-12B on a GPU (first where it fits), then a server elsewhere."""

    gpus = cuda_devices()[0]
    ram = total_memory_bytes()
    choices = [_offer_choice(offer, ram) for offer in offers(ram, gpus)]
    choices.insert(0 if holotron_fits(gpus) else len(choices), _holotron_choice(gpus))
    return [*choices, SERVER_CHOICE]


def _offer_choice(offer: Offer, ram: int | None) -> Choice:
    width = int(offer.fit.model.config["text_config"]["hidden_size"])
    try:
        estimate = estimate_words(step_seconds(offer.fit.plan, measure(width, offer.device)), offer.device)
    except ImportError as exc:  # the package without its engine: the download is refused later, in words
        estimate = f"a step's time not measured ({exc.name or 'torch'} is not installed)"
    # The desktop's reserve is named: "needs 19.6 GiB" beside "has 23.6 GiB" alone read as a contradiction.
    too_big = (
        f"does not fit: this computer has {gib_text(ram)} of RAM and the desktop keeps {gib_text(DESKTOP_RESERVE)}"
        if ram
        else "does not fit this computer"
    )
    mark = "recommended" if offer.recommended else ("fits" if offer.fits else too_big)
    label = (
        f"{offer.model.name} on the {'GPU' if offer.device == 'cuda' else 'CPU'} ({mark})\n"
        f"    {gib_text(offer.fit.plan.weights)} to download, {offer.need_words()}, {estimate}"
    )
    return Choice(label, offer.model.repo_id, offer.device, offer.fits)


def holotron_fits(gpus: Sequence[CudaDevice]) -> bool:
    return any(d.total_bytes >= HOLOTRON_12B.gpu_bytes for d in gpus)


def holotron_gpu_words(gpus: Sequence[CudaDevice]) -> str:
    """Why Holotron-12B fits or not, as the list says it: "no NVIDIA GPU here", "NVIDIA T4 has 16.0 GiB: too small"."""
    largest = max(gpus, key=lambda d: d.total_bytes, default=None)
    if holotron_fits(gpus):
        return "the best agent, fits this GPU"
    if largest is None:
        return "no NVIDIA GPU here"
    return f"{largest.name} has {gib_text(largest.total_bytes)}: too small"


def _holotron_choice(gpus: Sequence[CudaDevice]) -> Choice:
    model = HOLOTRON_12B
    label = (
        f"{model.name} on a GPU ({holotron_gpu_words(gpus)})\n"
        f"    {gib_text(model.download_bytes)} to download, needs a GPU of {gib_text(model.gpu_bytes)}"
    )
    return Choice(label, model.repo_id, "cuda", holotron_fits(gpus), model.profile)
