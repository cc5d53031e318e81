"""The in-process engine for Nemotron-Nano-VL-v2 checkpoints (Holotron-12B), built from parts.

transformers' own Nemotron-H language model, a C-RADIO vision tower and the projector written here,
all loaded from the checkpoint's real tensor names (`model`), fed by tiles (`tiles`) and prompts
(`prompt`) made here, and driven by Holodesk's own generation loop with an explicit hybrid cache
(`runner`). No code from the checkpoint runs. `spec` reads and checks config.json first.

Nemotron-3-Nano-Omni checkpoints (H Company's Holotron-3-Nano) run on the same engine: the same
language model with mixture-of-experts layers, the same vision tower and projector, and images
resized whole instead of tiled (`omni_images`).

One other family runs here too, in its own module: Qwen3.5 VL (H Company's Holo3, Holo3.1, Holo4;
`qwen35`), transformers' native model with the same generation loop and kept state.
"""
