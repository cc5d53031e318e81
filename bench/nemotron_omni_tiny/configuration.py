"""configuration.py of the tiny Nemotron-3-Nano-Omni checkpoint (imported by `trust_remote_code`).

Shaped like the real checkpoint's configuration (architecture `NemotronH_Nano_Omni_Reasoning_V3`):
`llm_config` (or `text_config`) becomes a Nemotron-H config (its pattern has mixture-of-experts
layers, "E"), `vision_config` is RADIO's with its `args` dict (where `min_num_patches` and
`max_num_patches` switch on the dynamic-resolution tiler) and its video settings, and an optional
`sound_config` (Parakeet; the tiny checkpoint has none). Needs a transformers with native Nemotron-H
(5.x), as the servers that read it have.
"""

from transformers import NemotronHConfig
from transformers.configuration_utils import PretrainedConfig


class NemotronH_Nano_Omni_Reasoning_V3_Config(PretrainedConfig):
    model_type = "NemotronH_Nano_Omni_Reasoning_V3"
    is_composition = True

    def __init__(
        self,
        vision_config=None,
        llm_config=None,
        text_config=None,
        sound_config=None,
        force_image_size=512,
        patch_size=16,
        downsample_ratio=0.5,
        template=None,
        ps_version="v2",
        image_tag_type="internvl",
        projector_hidden_size=4096,
        vit_hidden_size=1280,
        video_pruning_rate=0.0,
        norm_mean=(0.48145466, 0.4578275, 0.40821073),
        norm_std=(0.26862954, 0.26130258, 0.27577711),
        use_thumbnail=True,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if isinstance(vision_config, PretrainedConfig):
            self.vision_config = vision_config
        else:
            self.vision_config = PretrainedConfig(**(vision_config or {}))
        text = llm_config if llm_config is not None else text_config
        self.text_config = text if isinstance(text, PretrainedConfig) else NemotronHConfig(**(text or {}))
        if isinstance(sound_config, dict):
            sound_config = PretrainedConfig(**sound_config)
        self.sound_config = sound_config
        self.force_image_size = force_image_size
        self.patch_size = patch_size
        self.downsample_ratio = downsample_ratio
        self.template = template
        self.ps_version = ps_version
        self.image_tag_type = image_tag_type
        self.projector_hidden_size = projector_hidden_size
        self.vit_hidden_size = vit_hidden_size
        self.video_pruning_rate = video_pruning_rate
        self.norm_mean = [float(v) for v in norm_mean]
        self.norm_std = [float(v) for v in norm_std]
        self.use_thumbnail = use_thumbnail
