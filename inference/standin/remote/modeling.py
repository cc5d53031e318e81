"""The stand-in model, shaped like Nemotron-Nano-12B-v2-VL's `modeling.py` (class `NemotronH_Nano_VL_V2`).

What a loader meets here is what it meets in the real file:
- the language model comes from `modeling_nemotron_h` (which needs mamba-ssm to import);
- the vision tower imports einops (RADIO does) and refuses to build with flash attention requested
  when flash-attn is not installed; the language model's config carries the same request;
- `generate(pixel_values, input_ids, attention_mask, generation_config, **generate_kwargs)` casts the
  pixels to the vision tower's dtype and the image features to bfloat16 itself, so float16/float32
  weights fail in the projector; unknown kwargs (such as `image_flags`) reach the language model's
  generate, which refuses them;
- it returns only the new tokens (the language model generates from `inputs_embeds`).
Widths are tiny: one vision block, a 2-layer projector, a 4-layer hybrid language model.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import einops
import torch
from torch import nn
from torch.nn import functional
from transformers import GenerationConfig, PreTrainedModel

from .configuration import NemotronH_Nano_VL_V2_Config, TinyRadioConfig
from .modeling_nemotron_h import NemotronHForCausalLM


class SquaredReLU(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.pow(functional.relu(x), 2)


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        hidden_states = hidden_states * torch.rsqrt(hidden_states.pow(2).mean(-1, keepdim=True) + self.eps)
        return (self.weight.to(torch.float32) * hidden_states).to(input_dtype)


class TinyRadioBlock(nn.Module):
    """One pre-norm transformer block over a tile's patches."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = einops.rearrange(self.qkv(self.norm1(x)), "b n (three h d) -> three b h n d", three=3, h=self.heads)
        attended = functional.scaled_dot_product_attention(q, k, v)
        x = x + self.proj(einops.rearrange(attended, "b h n d -> b n (h d)"))
        return x + self.mlp(self.norm2(x))


class TinyRadioModel(nn.Module):
    """(tiles, 3, 512, 512) -> (tiles, 1024, width), like RADIO's `.features` without its class tokens."""

    def __init__(self, config: TinyRadioConfig) -> None:
        super().__init__()
        if config.use_flash_attn and importlib.util.find_spec("flash_attn") is None:
            raise ImportError("use_flash_attn is set but flash_attn is not installed: pip install flash-attn")
        self.config = config
        grid = config.image_size // config.patch_size
        self.patch_embed = nn.Conv2d(3, config.hidden_size, kernel_size=config.patch_size, stride=config.patch_size)
        self.position_embedding = nn.Parameter(torch.zeros(1, grid * grid, config.hidden_size))
        self.block = TinyRadioBlock(config.hidden_size, config.num_heads)
        self.norm = nn.LayerNorm(config.hidden_size)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(pixel_values).flatten(2).transpose(1, 2)
        return self.norm(self.block(patches + self.position_embedding))


class NemotronH_Nano_VL_V2(PreTrainedModel):
    config_class = NemotronH_Nano_VL_V2_Config
    main_input_name = "pixel_values"
    _supports_flash_attn_2 = True
    _supports_sdpa = True
    _no_split_modules = ["TinyRadioBlock", "BambaDecoderLayer"]  # noqa: RUF012 - read by transformers

    def __init__(self, config: NemotronH_Nano_VL_V2_Config) -> None:
        super().__init__(config)
        self.num_image_token = int((config.force_image_size // config.patch_size) ** 2 * config.downsample_ratio**2)
        self.downsample_ratio = config.downsample_ratio
        self.img_context_token_id = config.img_context_token_id
        self.language_model = NemotronHForCausalLM(config.text_config)
        self.vision_model = TinyRadioModel(config.vision_config)
        shuffled = config.vit_hidden_size * int(1 / config.downsample_ratio) ** 2
        self.mlp1 = nn.Sequential(
            RMSNorm(shuffled, eps=1e-5),
            nn.Linear(shuffled, config.projector_hidden_size, bias=False),
            SquaredReLU(),
            nn.Linear(config.projector_hidden_size, config.text_config.hidden_size, bias=False),
        )
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Conv2d):
            nn.init.normal_(module.weight, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)

    def get_input_embeddings(self) -> nn.Module:
        return self.language_model.get_input_embeddings()

    def pixel_shuffle(self, x: torch.Tensor, scale_factor: float = 0.5) -> torch.Tensor:
        n, w, h, c = x.size()
        x = x.view(n, w, int(h * scale_factor), int(c / scale_factor))
        x = x.permute(0, 2, 1, 3).contiguous()
        x = x.view(n, int(h * scale_factor), int(w * scale_factor), int(c / (scale_factor * scale_factor)))
        return x.permute(0, 2, 1, 3).contiguous()

    def extract_feature(self, pixel_values: torch.Tensor) -> torch.Tensor:
        vit_embeds = self.vision_model(pixel_values)
        vit_embeds = vit_embeds.to(dtype=torch.bfloat16)  # as the real file: bf16 whatever the weights are
        h = w = int(vit_embeds.shape[1] ** 0.5)
        vit_embeds = vit_embeds.reshape(vit_embeds.shape[0], h, w, -1)
        vit_embeds = self.pixel_shuffle(vit_embeds, scale_factor=self.downsample_ratio)
        vit_embeds = vit_embeds.reshape(vit_embeds.shape[0], -1, vit_embeds.shape[-1])
        return self.mlp1(vit_embeds)

    def _embed(self, input_ids: torch.Tensor, pixel_values: torch.Tensor | None) -> torch.Tensor:
        input_embeds = self.language_model.get_input_embeddings()(input_ids)
        if pixel_values is None:
            return input_embeds
        pixel_values = pixel_values.to(dtype=self.vision_model.patch_embed.weight.dtype)
        vit_embeds = self.extract_feature(pixel_values)
        batch, length, width = input_embeds.shape
        input_embeds = input_embeds.reshape(batch * length, width)
        selected = input_ids.reshape(batch * length) == self.img_context_token_id
        if int(selected.sum()) != vit_embeds.shape[0] * vit_embeds.shape[1]:
            raise ValueError(
                f"the prompt has {int(selected.sum())} image tokens but the tiles give"
                f" {vit_embeds.shape[0] * vit_embeds.shape[1]} features"
            )
        input_embeds[selected] = vit_embeds.reshape(-1, width).to(input_embeds.device)
        return input_embeds.reshape(batch, length, width)

    def forward(
        self,
        pixel_values: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        image_flags: torch.Tensor | None = None,
        **kwargs: Any,
    ) -> Any:
        if input_ids is None:
            raise ValueError("forward needs input_ids")
        inputs_embeds = self._embed(input_ids, pixel_values)
        return self.language_model(inputs_embeds=inputs_embeds, attention_mask=attention_mask, **kwargs)

    @torch.no_grad()
    def generate(
        self,
        pixel_values: torch.Tensor | None = None,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        generation_config: GenerationConfig | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **generate_kwargs: Any,
    ) -> torch.Tensor:
        assert self.img_context_token_id is not None
        if input_ids is None:
            raise ValueError("generate needs input_ids")
        inputs_embeds = self._embed(input_ids, pixel_values)
        return self.language_model.generate(
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            generation_config=generation_config,
            output_hidden_states=output_hidden_states,
            use_cache=True,
            **generate_kwargs,
        )
