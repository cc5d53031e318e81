"""The `holotron3-nano` profile: H Company's Holotron-3-Nano, over an OpenAI-compatible server (vLLM) or in process.

In process, Holodesk's engine runs the checkpoint (inference/engine: Nemotron-H with its
mixture-of-experts layers, C-RADIO on images resized whole as vLLM resizes them) and this profile's
parser reads its text as it reads the server's: the `<think>` reasoning set aside, the JSON step kept.

What is public, and where it is from (checked for this module):
- NVIDIA's computer-use cookbook for Nemotron-3-Nano-Omni (its README and its Holotron agent, a port
  of H Company's "holo-nano" agent loop): Holotron-3-Nano shares Nemotron-3-Nano-Omni's backbone and
  is served by vLLM as `vllm serve Hcompany/Holotron-3-Nano --trust-remote-code --reasoning-parser
  nemotron_v3` (no tool-call parser: the model answers in text). Each step is one JSON object
  `{note, thought, tool_call}` with `tool_name` beside the arguments, held to the step's JSON schema
  by vLLM's structured outputs and shown in the system prompt inside `<output_format>`; x and y are
  integers in [0, 1000] of the screenshot sent, origin top-left; observations are wrapped in
  `<observation>`, tool results in `<tool_output tool=...>` or `<error tool=...>`; the last 3
  screenshots stay in context, older ones become "[Image omitted by context cleaning]"; only the
  parsed step goes back into the history, never the raw output. Reasoning is on (the chat template
  opens `<think>`; `enable_thinking` false closes it) and comes back in `reasoning_content` (vLLM 0.32
  names it `reasoning`; the remote backend reads both).
- The checkpoint (Nemotron-3-Nano-Omni's config as NVIDIA's, vLLM's and third-party loaders read it):
  architecture `NemotronH_Nano_Omni_Reasoning_V3`, a Nemotron-H hybrid (Mamba-2, attention,
  mixture-of-experts layers) with a C-RADIO vision tower whose dynamic-resolution tiler takes each
  image as 1,024 to 13,312 16-px patches (256 to 3,328 tokens after pixel shuffle): a 1920x1080
  screenshot (8,100 patches) is seen at full size, so images are sent uncut; the coordinates are
  relative to the image, so the server's resizing moves no point.
- vLLM 0.32's `nemotron_v3` reasoning parser is Qwen3's `<think>`/`</think>` parser under another
  name, which also moves a reasoning-only answer into the content when thinking is off.

Holodesk's own choices, not H Company's: the tool vocabulary and the message layout are the holotron
profile's (the holo-nano tools but `key_down_desktop`/`key_up_desktop`, which Holodesk refuses, plus
`wait_desktop` and `ask_user`); the task goes in `<message from="user">` and a tool's output opens the
next observation's user turn, where the cookbook sends "Task: ..." and the tool output as turns of their
own; the server is started with `--limit-mm-per-prompt` allowing the 3 screenshots a step sends and
no video or audio. The parser never takes reasoning as the step's thought, so it cannot reach the
next request.
"""

from __future__ import annotations

import json

from holodesk.automation.actions import Point
from holodesk.inference.profiles.base import ImageBudget, ParsedStep
from holodesk.inference.profiles.holo3 import HoloAgentProfile
from holodesk.inference.profiles.holotron import HOLOTRON_TOOLS
from holodesk.inference.profiles.parsing import read_json_step, run_parser, step_answer
from holodesk.inference.profiles.vocabulary import POINTER

# The flags of NVIDIA's cookbook command: the checkpoint's configuration.py, and the reasoning parser.
PARSER_FLAGS = ("--trust-remote-code", "--reasoning-parser", "nemotron_v3")
# The screenshots a step sends (the agent loop keeps the last 3).
SCREENSHOTS = 3


class Holotron3NanoProfile(HoloAgentProfile):
    """Holotron-3-Nano (Nemotron-3-Nano-Omni base): structured JSON steps, reasoning on, the last 3 screenshots."""

    name = "holotron3-nano"
    # Served by vLLM, or run by the in-process engine (the same engine as Holotron-12B's, see above).
    runs_in_process = True
    default_budget = ImageBudget(images_per_request=SCREENSHOTS, keep_screenshots=SCREENSHOTS)
    native_by_default = False
    native_supported = False  # no tool-call parser in its vLLM command: the step is JSON in the text
    served_images = SCREENSHOTS

    @classmethod
    def vllm_command(cls, checkpoint: str) -> str:
        """The vLLM command line this profile's requests need (`holodesk doctor` prints it)."""
        limits = json.dumps({"image": cls.served_images, "video": 0, "audio": 0}, separators=(", ", ": "))
        return f"vllm serve {checkpoint} {' '.join(PARSER_FLAGS)} --limit-mm-per-prompt '{limits}'"

    def parse_navigation(self, text: str, pointer: Point | None = None) -> ParsedStep:
        context = {POINTER: pointer} if pointer is not None else {}
        # The reasoning is set aside first: only the answer's own note and thought are kept.
        return run_parser(lambda raw: read_json_step(step_answer(raw).answer, HOLOTRON_TOOLS, context), text, self.name)
