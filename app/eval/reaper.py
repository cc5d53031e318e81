"""Ending an eval worker's processes and removing its temp folder, however the worker went.

Each worker (app/eval/episode_worker.py) leads a process group of its own, and everything it starts
(Xvfb, openbox, chromedriver, Chromium) stays in it. Everything it writes to temp goes under one
folder, its root, that the parent (app/eval/workers.py `LocalWorker`) made for it and named in
TMPDIR: the desktop's runtime folder, Xvfb's log, the trajectory scratch, Chromium's profile.

`start_reaper` forks a small process that stays in that group and waits for the worker to die (a
pipe whose only writer is the worker, closed by the kernel however it died, SIGKILL included) or
for the worker's parent to die (an orphaned worker has no one to answer). Then it kills every other
process of the group, waits until they have exited, and removes the root. The worker's log stays
while the parent lives, which reads its tail to say why the worker died and removes the root itself
(`remove_root`, which first waits for the group to be gone): so a killed reaper leaves nothing either.
Meanwhile the reaper, out of the group, waits for the root to go or the parent to die, and then
removes what is left: a parent that dies without closing the worker leaves nothing either.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import time
from pathlib import Path

LOG_NAME = "worker.log"  # in the root, written by the parent's side (see workers.LocalWorker)
GROUP_EXIT_TIMEOUT_S = 15.0


def live_members(group: int, *, besides: int | None = None) -> list[int]:
    """Pids of the processes of `group` that have not exited (zombies excluded), `besides` left out."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == besides:
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):  # ended meanwhile
            continue
        if int(fields[2]) == group and fields[0] not in ("Z", "X"):  # state, parent, group, session, ...
            found.append(int(entry.name))
    return found


def wait_for_group(group: int, timeout_s: float = GROUP_EXIT_TIMEOUT_S, *, besides: int | None = None) -> bool:
    """Wait until no process of `group` (but `besides`) runs; False when some still did at `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while live_members(group, besides=besides):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_group_but_me(timeout_s: float = GROUP_EXIT_TIMEOUT_S) -> None:
    """SIGKILL every other process of this process's group, again for any forked meanwhile, until none runs."""
    me, group = os.getpid(), os.getpgrp()
    deadline = time.monotonic() + timeout_s
    while (members := live_members(group, besides=me)) and time.monotonic() < deadline:
        for pid in members:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)


def remove_root(root: Path, *, keep_log: bool = False) -> None:
    """Remove the worker's root folder (all of it, or all but the log the parent still reads)."""
    if not keep_log:
        shutil.rmtree(root, ignore_errors=True)
        return
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            if entry.name == LOG_NAME:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)


def start_reaper(root: Path | None, parent: int) -> None:
    """Fork the reaper (see the module docstring); nothing when this process leads no group of its own.

    `parent` is the pid of the process that started the worker; a worker whose parent is gone
    already is ended at once by its reaper.
    """
    if os.getpgrp() != os.getpid():
        return  # not a group of our own (started by hand): killing the group could hit others
    parent_fd = os.pidfd_open(parent)  # readable once `parent` has exited; immune to pid reuse
    read_end, write_end = os.pipe()
    if os.fork() != 0:
        os.close(read_end)
        os.close(parent_fd)
        return  # the worker keeps write_end open for its whole life, never writing to it
    try:
        os.close(write_end)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        keep = sorted({read_end, parent_fd})
        os.closerange(3, keep[0])
        os.closerange(keep[0] + 1, keep[1])
        os.closerange(keep[1] + 1, 65536)
        # SIGINT and SIGTERM meant for the worker's group must not end the reaper before its work.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        worker_gone = False
        while not worker_gone:
            readable, _, _ = select.select([read_end, parent_fd], [], [])
            if parent_fd in readable:
                break
            worker_gone = not os.read(read_end, 1)
        kill_group_but_me()
        if root is not None:
            parent_alive = not select.select([parent_fd], [], [], 0)[0]
            remove_root(root, keep_log=parent_alive)
            if parent_alive:
                # The parent reads the log and removes the root when it closes the worker; should it
                # die first (a Ray actor ended with its node), the root is ours to remove. Out of the
                # worker's group (and session), which the parent waits to see end before it removes the root.
                os.setsid()
                while root.exists() and not select.select([parent_fd], [], [], 0.5)[0]:
                    pass
                shutil.rmtree(root, ignore_errors=True)
    finally:
        os._exit(0)
