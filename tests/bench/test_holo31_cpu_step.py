"""bench/holo31_cpu_step's parts that need no server: the request it measures, and its memory sampling."""

from __future__ import annotations

import os
import subprocess
import sys

from bench.holo31_cpu_step import SCREEN, group_rss, peak_rss, step_request

HOLD_BYTES = 300 * 1024 * 1024


def test_the_step_is_the_holo31_profiles_request_at_that_history() -> None:
    for history in (1, 10):
        request = step_request(history, 7)
        assert request.max_new_tokens == 7
        assert [image.size for image in request.images] == [SCREEN]  # holo3.1 shows one screenshot
        assert request.response_schema is not None and request.chat_template_kwargs == {"enable_thinking": True}
        text = str(request.messages)
        assert f"Step {history}:" in text and f"Step {history + 1}:" not in text


def test_a_process_groups_resident_memory_is_summed_and_its_peak_kept() -> None:
    # A child in its own session holds 300 MB; its grandchild (same group) another 300 MB.
    code = (
        "import os, subprocess, sys, time\n"
        f"data = bytearray({HOLD_BYTES}); data[::4096] = b'x' * len(data[::4096])\n"
        f"child = subprocess.Popen([sys.executable, '-c', \"import time; d = bytearray({HOLD_BYTES});"
        " d[::4096] = b'x' * len(d[::4096]); print('ready', flush=True); time.sleep(60)\"])\n"
        "time.sleep(60)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert leader.stdout is not None
        assert leader.stdout.readline().strip() == b"ready"  # the grandchild has touched its memory
        with peak_rss(leader.pid) as peak:
            now = group_rss(leader.pid)
        assert now >= 2 * HOLD_BYTES
        assert peak[0] >= now - 50 * 1024 * 1024
        # Only that group: not this process (pytest with torch loaded holds far more than 200 MB beside them).
        assert now < 2 * HOLD_BYTES + 200 * 1024 * 1024
    finally:
        os.killpg(leader.pid, 9)
        leader.wait(timeout=30)
    assert group_rss(leader.pid) == 0
