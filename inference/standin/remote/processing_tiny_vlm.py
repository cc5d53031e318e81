"""Processor of the tiny test VLM: as Nemotron-Nano-VL's, each `<image>` in the text becomes
`<img>` + 256 `<image>` tokens per tile + `</img>`, and the images become tiles of pixel values.
"""

from __future__ import annotations

from typing import Any

from PIL import Image
from transformers import BatchFeature, ProcessorMixin

IMAGE_TAG = "<image>"
IMAGE_START = "<img>"
IMAGE_END = "</img>"


class TinyVLMProcessor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]  # noqa: RUF012 - read by transformers
    # Auto classes, so ProcessorMixin finds the remote image processor through its own auto_map.
    image_processor_class = "AutoImageProcessor"
    tokenizer_class = "AutoTokenizer"

    def __init__(
        self, image_processor: Any = None, tokenizer: Any = None, chat_template: str | None = None, **kwargs: Any
    ):
        super().__init__(image_processor, tokenizer, chat_template=chat_template)
        self.image_token_id = tokenizer.convert_tokens_to_ids(IMAGE_TAG)
        self.num_image_token = int(
            (image_processor.image_size // image_processor.patch_size) ** 2 * image_processor.downsample_ratio**2
        )

    def __call__(
        self,
        text: str | list[str] | None = None,
        images: Image.Image | list[Image.Image] | None = None,
        return_tensors: str | None = None,
        **kwargs: Any,
    ) -> BatchFeature:
        texts = [text] if isinstance(text, str) else list(text or [])
        image_list = [images] if isinstance(images, Image.Image) else list(images or [])
        data: dict[str, Any] = {}
        if image_list:
            image_inputs = self.image_processor(image_list)
            tiles_per_image = [int(n) for n in image_inputs["num_patches"]]
            texts = [self._expand_image_tags(t, tiles_per_image) for t in texts]
            data.update(image_inputs)
        encoded = self.tokenizer(texts, add_special_tokens=False, return_token_type_ids=False)
        data.update(encoded)
        return BatchFeature(data=data, tensor_type=return_tensors)

    def _expand_image_tags(self, text: str, tiles_per_image: list[int]) -> str:
        parts = text.split(IMAGE_TAG)
        if len(parts) - 1 != len(tiles_per_image):
            raise ValueError(f"the text has {len(parts) - 1} {IMAGE_TAG} tags but {len(tiles_per_image)} images")
        expanded = parts[0]
        for tiles, part in zip(tiles_per_image, parts[1:], strict=True):
            expanded += IMAGE_START + IMAGE_TAG * (tiles * self.num_image_token) + IMAGE_END + part
        return expanded

    def batch_decode(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.tokenizer.batch_decode(*args, **kwargs)

    def decode(self, *args: Any, **kwargs: Any) -> str:
        return self.tokenizer.decode(*args, **kwargs)
