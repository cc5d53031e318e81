"""The tiny test VLM: shaped like Nemotron-Nano-VL's wrapper, small enough to run on a laptop CPU.

Like the real `NemotronH_Nano_VL_V2`, the wrapper is a PreTrainedModel (not a GenerationMixin)
whose own `generate(pixel_values, input_ids, attention_mask, **kwargs)` puts the projected image
features in place of the `<image>` tokens and hands `inputs_embeds` to the language model's
`generate`, which builds its own hybrid Mamba/attention cache. Unlike the real one it does not
cast pixel values itself: a caller that forgets to cast to the model's dtype gets an error here.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional
from transformers import BambaForCausalLM, PreTrainedModel

from .configuration_tiny_vlm import TinyVLMConfig


class TinyVisionBlock(nn.Module):
    """One pre-norm transformer block over the patches of a tile."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(batch, length, 3, self.heads, width // self.heads).unbind(2)
        attended = functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, length, width))
        return x + self.mlp(self.norm2(x))


class TinyVisionEncoder(nn.Module):
    """Conv patch embedding + learned positions + one block: (tiles, 3, 512, 512) -> (tiles, 1024, width)."""

    def __init__(self, config: TinyVLMConfig) -> None:
        super().__init__()
        width = config.vit_hidden_size
        grid = config.image_size // config.patch_size
        self.patch_embed = nn.Conv2d(3, width, kernel_size=config.patch_size, stride=config.patch_size)
        self.position_embedding = nn.Parameter(torch.zeros(1, grid * grid, width))
        self.block = TinyVisionBlock(width, config.vit_num_heads)
        self.norm = nn.LayerNorm(width)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)
        return self.norm(self.block(patches + self.position_embedding))


def pixel_shuffle(features: torch.Tensor, scale: float) -> torch.Tensor:
    """(n, h, w, c) -> (n, h*scale, w*scale, c/scale^2): 2x2 neighbouring patches become one token."""
    n, h, w, c = features.shape
    features = features.reshape(n, h, int(w * scale), int(c / scale))
    features = features.permute(0, 2, 1, 3).reshape(n, int(w * scale), int(h * scale), int(c / scale**2))
    return features.permute(0, 2, 1, 3).contiguous()


class TinyVLMPreTrainedModel(PreTrainedModel):
    config_class = TinyVLMConfig
    base_model_prefix = "tiny_vlm"
    _no_split_modules = ["TinyVisionBlock", "BambaDecoderLayer"]  # noqa: RUF012 - read by transformers
    _supports_sdpa = True

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Conv2d):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


class TinyVLMForCausalLM(TinyVLMPreTrainedModel):
    main_input_name = "pixel_values"

    def __init__(self, config: TinyVLMConfig) -> None:
        super().__init__(config)
        self.vision_model = TinyVisionEncoder(config)
        shuffled = config.vit_hidden_size * int(1 / config.downsample_ratio) ** 2
        self.mlp1 = nn.Sequential(
            nn.LayerNorm(shuffled),
            nn.Linear(shuffled, config.projector_hidden_size),
            nn.GELU(),
            nn.Linear(config.projector_hidden_size, config.text_config.hidden_size),
        )
        self.language_model = BambaForCausalLM(config.text_config)
        self.img_context_token_id = config.image_context_token_id
        # What the last call received, so tests can see what the backend handed over.
        self.last_pixel_values_dtype: torch.dtype | None = None
        self.post_init()

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.get_input_embeddings()

    def extract_feature(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Tiles -> image tokens in the language model's width: (tiles, 256, hidden)."""
        self.last_pixel_values_dtype = pixel_values.dtype
        if pixel_values.dtype != self.dtype:
            raise TypeError(f"pixel_values are {pixel_values.dtype} but the model is {self.dtype}: cast them first")
        features = self.vision_model(pixel_values)
        grid = int(features.shape[1] ** 0.5)
        features = features.reshape(features.shape[0], grid, grid, -1)
        features = pixel_shuffle(features, self.config.downsample_ratio)
        return self.mlp1(features.reshape(features.shape[0], -1, features.shape[-1]))

    def embed(self, input_ids: torch.Tensor, pixel_values: torch.Tensor | None) -> torch.Tensor:
        """Token embeddings with each `<image>` token replaced by the next image feature, in order."""
        embeddings = self.get_input_embeddings()(input_ids)
        if pixel_values is None:
            return embeddings
        features = self.extract_feature(pixel_values)
        features = features.reshape(-1, features.shape[-1]).to(embeddings.dtype)
        selected = input_ids == self.img_context_token_id
        if int(selected.sum()) != features.shape[0]:
            raise ValueError(
                f"the prompt has {int(selected.sum())} image tokens but the tiles give {features.shape[0]} features"
            )
        embeddings = embeddings.clone()
        embeddings[selected] = features
        return embeddings

    def forward(
        self,
        input_ids: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        num_patches: torch.Tensor | None = None,  # a processor output the model does not need
        **kwargs: Any,
    ) -> Any:
        inputs_embeds = self.embed(input_ids, pixel_values)
        return self.language_model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **kwargs)

    @torch.no_grad()
    def generate(
        self,
        pixel_values: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        **generate_kwargs: Any,
    ) -> torch.Tensor:
        if input_ids is None:
            raise ValueError("generate needs input_ids")
        inputs_embeds = self.embed(input_ids, pixel_values)
        return self.language_model.generate(
            input_ids=input_ids, inputs_embeds=inputs_embeds, attention_mask=attention_mask, **generate_kwargs
        )
