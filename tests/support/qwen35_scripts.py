"""What the scripted tiny Qwen3.5 checkpoints say (bench/qwen35_tiny's scripted chain): a click in Qwen3.5's
XML tool-call form, and the same click broken. Served by vLLM (tests/vllm/test_holo_on_vllm.py) and run by
the in-process engine (tests/inference/engine/test_qwen35_tool_calls.py), the same scripts give the same step."""

from __future__ import annotations

import json

from bench.qwen35_tiny import END_OF_TURN

REASONING = "The inbox is on the left."
THOUGHT = "Open the inbox."
# What the scripted model says after the generation prompt's "<think>\n": reasoning, its end, the
# step's note and thought as the message text, then click_desktop in Qwen3.5's XML tool-call form.
# Every piece is one token and used once (bench/qwen35_tiny's scripted chain).
CLICK_SCRIPT = (
    REASONING,
    "</think>",
    "\n\n",
    json.dumps({"note": None, "thought": THOUGHT}),
    "<tool_call>",
    "\n<function=click_desktop>\n<parameter=element>\n",
    "Inbox folder",
    "\n</parameter>\n<parameter=x>\n",
    "120",
    "\n</parameter>\n<parameter=y>\n",
    "340",
    "\n</parameter>\n</function>\n",
    "</tool_call>",
    END_OF_TURN,
)
# The same click with its y parameter left out: the parser returns the call, the vocabulary refuses it.
BROKEN_SCRIPT = (
    "I click the inbox.",
    "</think>",
    "\n\n",
    "<tool_call>",
    "\n<function=click_desktop>\n<parameter=x>\n",
    "120",
    "\n</parameter>\n</function>\n",
    "</tool_call>",
    END_OF_TURN,
)
