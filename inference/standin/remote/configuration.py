"""Configuration of the stand-in, shaped like Nemotron-Nano-12B-v2-VL's `configuration.py`.

As in the real file, `attn_implementation` defaults to "flash_attention_2" and the constructor pushes
its value into the language model's config and the vision tower's (`use_flash_attn`). With
transformers 4.53.3, `from_pretrained` always hands the config an explicit `attn_implementation` (None
unless the caller chose one), so what reaches the sub-models is the caller's choice, or "eager"
(the property's answer for None) when there is none: the loader must choose.
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from .configuration_nemotron_h import NemotronHConfig


class TinyRadioConfig(PretrainedConfig):
    """The vision tower's config (the real one is RADIO's, loaded through its own auto_map)."""

    model_type = "tiny_radio"

    def __init__(
        self, image_size: int = 512, patch_size: int = 16, hidden_size: int = 32, num_heads: int = 2, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.image_size = image_size
        self.patch_size = patch_size
        self.hidden_size = hidden_size
        self.num_heads = num_heads
        self.use_flash_attn = bool(kwargs.get("use_flash_attn", False))


class NemotronH_Nano_VL_V2_Config(PretrainedConfig):
    model_type = "NemotronH_Nano_VL_V2"
    is_composition = True

    def __init__(
        self,
        vision_config: dict[str, Any] | None = None,
        text_config: dict[str, Any] | None = None,
        force_image_size: int = 512,
        patch_size: int = 16,
        downsample_ratio: float = 0.5,
        projector_hidden_size: int = 64,
        vit_hidden_size: int = 32,
        img_context_token_id: int = 0,
        attn_implementation: str = "flash_attention_2",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.vision_config = TinyRadioConfig(**(vision_config or {}))
        self.text_config = NemotronHConfig(**(text_config or {}))
        self.force_image_size = force_image_size
        self.patch_size = patch_size
        self.downsample_ratio = downsample_ratio
        self.projector_hidden_size = projector_hidden_size
        self.vit_hidden_size = vit_hidden_size
        self.img_context_token_id = img_context_token_id
        # What the real constructor does: the property reads back "eager" when nothing was chosen.
        self._attn_implementation = attn_implementation
        self.vision_config.use_flash_attn = (
            self._attn_implementation is not None and "flash_attention" in self._attn_implementation
        )
        self.text_config._attn_implementation = self._attn_implementation
