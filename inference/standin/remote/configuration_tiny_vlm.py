"""Configuration of the tiny test VLM: a one-block vision tower, an MLP projector, a Bamba hybrid LM.

This file ships inside the checkpoint (config.json's auto_map points at it), so it is loaded the
way Holotron's own remote code is: through trust_remote_code.
"""

from __future__ import annotations

from typing import Any

from transformers import BambaConfig, PretrainedConfig


class TinyVLMConfig(PretrainedConfig):
    """Vision geometry as in Nemotron-Nano-VL (512 px tiles, patch 16, pixel shuffle 0.5), tiny widths."""

    model_type = "tiny_holotron_vl"
    sub_configs = {"text_config": BambaConfig}  # noqa: RUF012 - transformers reads this class attribute

    def __init__(
        self,
        text_config: dict[str, Any] | BambaConfig | None = None,
        image_size: int = 512,
        patch_size: int = 16,
        downsample_ratio: float = 0.5,
        vit_hidden_size: int = 32,
        vit_num_heads: int = 2,
        projector_hidden_size: int = 64,
        image_context_token_id: int = 0,
        **kwargs: Any,
    ) -> None:
        if isinstance(text_config, dict):
            text_config = BambaConfig(**text_config)
        self.text_config = text_config if text_config is not None else BambaConfig()
        self.image_size = image_size
        self.patch_size = patch_size
        self.downsample_ratio = downsample_ratio
        self.vit_hidden_size = vit_hidden_size
        self.vit_num_heads = vit_num_heads
        self.projector_hidden_size = projector_hidden_size
        self.image_context_token_id = image_context_token_id
        super().__init__(**kwargs)

    @property
    def image_tokens_per_tile(self) -> int:
        return int((self.image_size // self.patch_size) ** 2 * self.downsample_ratio**2)
