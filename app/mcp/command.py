"""`holodesk mcp`: print a host's configuration, or serve MCP (stdio, or loopback HTTP) with approval here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import anyio

from holodesk.app.common.backend_problems import in_words, preflight
from holodesk.app.common.policy_factory import PolicyConfigError, build_policy
from holodesk.app.common.settings import load_settings
from holodesk.app.mcp.agent_task import PolicyUnavailable, TaskSettings
from holodesk.app.mcp.desk import Desk
from holodesk.app.mcp.host_config import config_text
from holodesk.app.mcp.tray_note import TRAY_KEEPS_ITS_FOLDERS, TRAY_RUNNING, tray_is_running
from holodesk.app.mcp.tray_relay import HANDED_OVER, TrayStream, open_tray_stream, relay
from holodesk.automation.routines.routine_file import default_routines_root
from holodesk.automation.trajectory import TrajectoryWriteError, check_writable
from holodesk.inference.errors import InferenceError
from holodesk.inference.model_policy import ModelPolicy

EXIT_DONE = 0
EXIT_CONFIG = 2


def print_config(host: str, out: TextIO, err: TextIO) -> int:
    try:
        where, snippet = config_text(host)
    except ValueError as exc:
        err.write(f"holodesk mcp: {exc}\n")
        return EXIT_CONFIG
    err.write(f"{where}\n")
    out.write(snippet)
    return EXIT_DONE


def serve(*, http: bool, port: int, sessions: Path | None, routines: Path | None, err: TextIO = sys.stderr) -> int:
    """Serve until the client (stdio) or the person (Ctrl+C, HTTP) ends it; approvals on the panel here, or,
    over stdio while the tray app runs, on the tray's (this process relays)."""

    if not http:
        if sessions is None and routines is None:
            handed = open_tray_stream()
            if isinstance(handed, TrayStream):
                err.write(f"holodesk mcp: {HANDED_OVER}\n")
                err.flush()
                return relay(handed, err)
            if handed is not None:
                err.write(f"holodesk mcp: {handed}; this server shows its own approval panel\n")
        elif tray_is_running():
            err.write(f"holodesk mcp: {TRAY_KEEPS_ITS_FOLDERS}\n")
    elif tray_is_running():
        err.write(f"holodesk mcp: {TRAY_RUNNING}\n")

    loaded = load_settings()
    if loaded.problem is not None:
        for line in loaded.problem.problems:
            err.write(f"holodesk mcp: settings file {loaded.problem.path}: {line} (its default is used)\n")
    settings = loaded.settings
    sessions = sessions or settings.sessions.folder
    try:
        check_writable(sessions)
    except TrajectoryWriteError as exc:
        err.write(f"holodesk mcp: {exc}; choose another folder with --sessions\n")
        return EXIT_CONFIG
    sock = None
    if http:
        # heavy: the MCP SDK
        from holodesk.app.mcp.transports import bind_loopback

        try:
            sock = bind_loopback(port)
        except OSError as exc:
            err.write(f"holodesk mcp: {exc}\n")
            return EXIT_CONFIG

    def run_server(desk: Desk) -> None:
        # heavy: the MCP SDK
        from holodesk.app.mcp.transports import serve_http, serve_stdio

        if sock is not None:
            anyio.run(serve_http, desk, sock)
        else:
            anyio.run(serve_stdio, desk)

    options = settings.to_policy_options()
    task_settings = TaskSettings(settings.run.max_steps, options.backend, options.profile)

    def load_policy() -> ModelPolicy:
        """The settings' model, checked ready to serve; PolicyUnavailable in words when it is not."""

        try:
            policy = build_policy(options)
            problem = preflight(policy.backend)
        except PolicyConfigError as exc:
            raise PolicyUnavailable(str(exc)) from None
        except (InferenceError, OSError) as exc:
            raise PolicyUnavailable(in_words(exc)) from None
        if problem is not None:
            raise PolicyUnavailable(problem)
        return policy

    from holodesk.app.gui.mcp_host import run_with_panel  # shows the overlay and the panel: Qt

    return run_with_panel(
        run_server,
        sessions=sessions,
        routines=routines or default_routines_root(),
        monitor=settings.run.capture_monitor,
        auto_approve_kinds=settings.approval.auto_approve,
        load_policy=load_policy,
        task_settings=task_settings,
        err=err,
    )
