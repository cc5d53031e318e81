"""The stand-in's language-model config: Bamba (the 4.53.3 hybrid closest to Nemotron-H) named nemotron_h.

Ships inside the checkpoint, as the real `configuration_nemotron_h.py` does.
"""

from __future__ import annotations

from transformers import BambaConfig


class NemotronHConfig(BambaConfig):
    """A miniature Nemotron-H: Mamba-2 and attention layers, hidden 64."""

    model_type = "nemotron_h"
