"""The stand-in's processor, shaped like Nemotron-Nano-12B-v2-VL's `processing.py`.

It names its image processor by the class name "NemotronNanoVLV2ImageProcessor", which transformers
4.53.3 cannot find unless it was registered first (`AutoImageProcessor.register`). Each `<image>` in
the text becomes `<img>` + 256 `<image>` tokens per tile + `</img>`; the tile counts come from the
image processor's `num_patches` tensor (`.tolist()`); every image-processor output passes through.
"""

from __future__ import annotations

from typing import Any

from PIL import Image
from transformers import BatchEncoding, ProcessorMixin

IMG_INPUT_TAG = "<image>"
IMG_START = "<img>"
IMG_END = "</img>"
IMG_CONTEXT = "<image>"


class NemotronNanoVLV2Processor(ProcessorMixin):
    attributes = ["image_processor", "tokenizer"]  # noqa: RUF012 - read by transformers
    image_processor_class = "NemotronNanoVLV2ImageProcessor"
    tokenizer_class = "PreTrainedTokenizerFast"

    def __init__(
        self, image_processor: Any = None, tokenizer: Any = None, chat_template: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(image_processor, tokenizer, chat_template=chat_template)
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(IMG_CONTEXT)
        self.image_size = image_processor.image_size
        self.num_image_token = int(
            (image_processor.image_size // image_processor.patch_size) ** 2 * image_processor.downsample_ratio**2
        )

    def __call__(
        self,
        text: str | list[str] | None = None,
        images: Image.Image | list[Image.Image] | None = None,
        return_tensors: str | None = None,
        **kwargs: Any,
    ) -> BatchEncoding:
        texts = self._make_batch_input(text)
        image_list = self._make_batch_input(images)
        image_inputs: Any = {}
        if image_list:
            image_inputs = self.image_processor(image_list)
            texts = self._add_image_placeholders(texts, image_inputs)
        text_inputs = self.tokenizer(texts, add_special_tokens=False)
        return BatchEncoding(data=dict(**text_inputs, **image_inputs), tensor_type=return_tensors)

    def _add_image_placeholders(self, texts: list[str], image_inputs: Any) -> list[str]:
        tiles_per_image = image_inputs["num_patches"].tolist()
        results = []
        for text in texts:
            parts = text.split(IMG_INPUT_TAG)
            if len(parts) - 1 != len(tiles_per_image):
                raise ValueError(
                    f"Number of {IMG_INPUT_TAG} tokens ({len(parts) - 1}) doesn't match num_patches_list length"
                    f" ({len(tiles_per_image)})"
                )
            result = parts[0]
            for tiles, part in zip(tiles_per_image, parts[1:], strict=True):
                result += IMG_START + IMG_CONTEXT * (tiles * self.num_image_token) + IMG_END + part
            results.append(result)
        return results

    @staticmethod
    def _make_batch_input(item: Any) -> list[Any]:
        if item is None:
            return []
        return item if isinstance(item, list) else [item]

    def batch_decode(self, *args: Any, **kwargs: Any) -> list[str]:
        return self.tokenizer.batch_decode(*args, **kwargs)

    def decode(self, *args: Any, **kwargs: Any) -> str:
        return self.tokenizer.decode(*args, **kwargs)
