"""The Debian package as a user gets it: built, linted, installed with apt, started, used, purged.

packaging/debian/build-deb.sh builds the .deb (a venv of PyPI wheels under /usr/lib/holodesk, on Debian's
python3); this module checks it with lintian and appstreamcli, installs it with apt on this machine,
starts `holodesk` from /usr/bin under Xvfb with a tray host (the icon must be embedded in it), runs
a task against the test server on 127.0.0.1 (remote backend), and purges the package: nothing of it
may stay on disk, and the users' data (settings, sessions) must, byte for byte, in the real folders
(~/.config/holodesk, ~/.local/share/holodesk) of a user the test makes with useradd under /home (and
removes after) and of root, who purges (root's own folders moved aside first if there, and put back).
Marked `deb` (minutes: the build alone compresses half a gigabyte); it needs root for apt and the
package's dependencies installed.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bench.rigs.fake_openai_server import Completion, FakeOpenAIServer
from holodesk.app.cli.main import build_parser
from tests.e2e.scripting import holotron
from tests.e2e.test_tray_app import open_prompt_with_the_hotkey, wait_for_session_end, xdotool
from tests.support.waiting import wait_until
from tests.support.x11_probe import selection_owned

pytestmark = [pytest.mark.deb, pytest.mark.display]

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "holodesk"
PREFIX = Path("/usr/lib/holodesk")
# Everything the package puts outside /usr/lib/holodesk, and must take away again.
SHIPPED = (
    "/usr/bin/holodesk",
    "/usr/share/applications/holodesk.desktop",
    "/usr/share/applications/holodesk-new-task.desktop",
    "/usr/share/icons/hicolor/scalable/apps/holodesk.svg",
    "/usr/share/metainfo/io.github.holodesk.Holodesk.metainfo.xml",
    "/usr/share/man/man1/holodesk.1.gz",
    "/usr/share/holodesk/holodesk-autostart.desktop",
    "/usr/share/holodesk/holotron-requirements.txt",
    "/usr/share/holodesk/eval-requirements.txt",
    "/usr/share/holodesk/cluster-requirements.txt",
    "/usr/share/doc/holodesk/copyright",
    "/usr/share/lintian/overrides/holodesk",
)
TIMEOUT_S = 900


def _run(*argv: str, timeout: float = TIMEOUT_S, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, **kwargs)  # type: ignore[call-overload]


def _installed() -> bool:
    status = _run("dpkg-query", "-W", "-f=${db:Status-Status}", PACKAGE, timeout=30)
    return status.returncode == 0 and status.stdout.strip() == "installed"


@pytest.fixture(scope="module")
def deb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.fail("the package test installs with apt: run it as root on Debian 12", pytrace=False)
    out = tmp_path_factory.mktemp("deb")
    built = _run(str(REPO / "packaging" / "debian" / "build-deb.sh"), str(out))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (package,) = out.glob("holodesk_*_amd64.deb")
    return package


@pytest.fixture(scope="module")
def installed(deb: Path, lintian: LintianRun) -> Iterator[Path]:
    """The package installed with apt; lintian checks the same file meanwhile (`lintian`)."""
    done = _run("apt-get", "install", "-y", "--no-install-recommends", str(deb))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    yield deb
    if _installed():  # the purge test did not run, or failed before purging
        _run("apt-get", "purge", "-y", PACKAGE)


# Lintian checks left out: each can only say things below a warning, which this test does not decide on.
# binaries/spelling reads the strings of every shared library (most of lintian's time on this venv).
CHECKS_BELOW_WARNING = ("binaries/spelling",)
LINTIAN_TAGS = Path("/usr/share/lintian/tags")


def _severities_of_check(check: str) -> set[str]:
    """The severities of every tag lintian's `check` can emit, from lintian's own tag descriptions."""
    found = set()
    for description in LINTIAN_TAGS.rglob("*.tag"):
        fields = dict(re.findall(r"^(Check|Severity): *(.+)$", description.read_text(errors="replace"), re.M))
        if fields.get("Check") == check:
            found.add(fields.get("Severity", "?"))
    return found


@dataclass
class LintianRun:
    """Lintian running on the package in the background, and the file its report goes to."""

    process: subprocess.Popen[bytes]
    report: Path


@pytest.fixture(scope="module")
def lintian(deb: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LintianRun]:
    """Lintian on the package, started beside the module's other tests (a minute of one core, much of
    the rest of this module waiting on apt and on the app); `test_lintian_finds_nothing_unexplained`
    reads its verdict. Its output goes to a file, so a long report cannot fill a pipe and stall it."""
    # Each tag allowed here is explained in packaging/debian/lintian-overrides, which ships in the package.
    skip = ("--dont-check-part", ",".join(CHECKS_BELOW_WARNING))
    report = tmp_path_factory.mktemp("lintian") / "report.txt"
    with report.open("wb") as out:
        command = ["lintian", *skip, "--fail-on", "error,warning", "--tag-display-limit", "0", str(deb)]
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    yield LintianRun(process, report)
    if process.poll() is None:
        process.kill()
        process.wait()


def test_appstream_metadata_is_valid() -> None:
    metainfo = REPO / "packaging" / "debian" / "io.github.holodesk.Holodesk.metainfo.xml"
    result = _run("appstreamcli", "validate", "--no-net", str(metainfo), timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    desktop = _run("desktop-file-validate", str(REPO / "packaging" / "linux" / "holodesk.desktop"), timeout=60)
    assert desktop.returncode == 0 and not desktop.stdout.strip(), desktop.stdout


def test_the_installed_command_and_its_man_page_match_the_help(installed: Path) -> None:
    assert Path("/usr/bin/holodesk").resolve() == PREFIX / "bin" / "holodesk"
    version = _run("/usr/bin/holodesk", "--version", timeout=60)
    assert re.fullmatch(r"holodesk \d+\.\d+\.\d+\n", version.stdout), version.stdout + version.stderr
    page = _run(
        "man", "-P", "cat", "-l", "/usr/share/man/man1/holodesk.1.gz", timeout=60, env={**os.environ, "MANWIDTH": "200"}
    )
    assert page.returncode == 0, page.stderr
    commands = next(a for a in build_parser()._actions if a.dest == "command").choices  # type: ignore[union-attr]
    for command in commands:
        assert re.search(rf"^ +{re.escape(command)}$", page.stdout, re.M), f"the man page lacks {command}"
    assert "exit codes: 0 done" in page.stdout
    # Every file the package lists exists, and the venv's scripts name the installed interpreter.
    listed = set(_run("dpkg", "-L", PACKAGE, timeout=60).stdout.split())
    assert set(SHIPPED) <= listed
    assert (PREFIX / "bin" / "holodesk").read_text().startswith("#!/usr/lib/holodesk/bin/python\n")


def test_the_pip_the_docs_give_for_root_is_the_environments_own(installed: Path, tmp_path: Path) -> None:
    """`sudo /usr/lib/holodesk/bin/pip install -r ...` (README, man page, the requirements file): that pip is
    there, installs into the package's environment, and ignores a pip.py in the folder it is started from."""
    requirements = Path("/usr/share/holodesk/holotron-requirements.txt").read_text(encoding="utf-8")
    assert "sudo /usr/lib/holodesk/bin/pip install -r /usr/share/holodesk/holotron-requirements.txt" in requirements
    (tmp_path / "pip.py").write_text("print('PLANTED pip.py ran')\n", encoding="utf-8")
    pip = _run(str(PREFIX / "bin" / "pip"), "--version", timeout=60, cwd=tmp_path)
    assert pip.returncode == 0 and "PLANTED" not in pip.stdout, pip.stdout + pip.stderr
    assert f"{PREFIX}/lib/python3" in pip.stdout, pip.stdout


def test_the_packaged_advice_for_eval_and_cluster_names_the_packages_own_files(installed: Path) -> None:
    """From the package, `holodesk eval miniwob` and `--ray` say to install the requirements file the
    package ships, with the environment's own pip (not `pip install 'holodesk[eval]'`)."""
    said = _run(
        str(PREFIX / "bin" / "python"), "-c",
        "from holodesk.app.eval.miniwob_browser import MISSING_MINIWOB as m; from holodesk.app.eval.ray_backend"
        " import MISSING_RAY as r; print(m); print(r)", timeout=120,
    )  # fmt: skip
    assert said.returncode == 0, said.stderr
    for extra, line in zip(("eval", "cluster"), said.stdout.splitlines(), strict=True):
        wanted = f"/usr/share/holodesk/{extra}-requirements.txt"
        assert f"sudo {PREFIX}/bin/pip install -r {wanted}" in line and "holodesk[" not in line, line
        assert "miniwob" in Path(wanted).read_text() or "ray[data]" in Path(wanted).read_text()


def test_every_shipped_file_has_its_checksum(installed: Path) -> None:
    """The package ships DEBIAN/md5sums: dpkg --verify checks every file against it."""
    sums = Path("/var/lib/dpkg/info/holodesk.md5sums")
    assert sums.is_file() and "usr/bin/holodesk" not in sums.read_text()  # a link has no sum
    assert "usr/share/holodesk/eval-requirements.txt" in sums.read_text()
    verified = _run("dpkg", "--verify", PACKAGE, timeout=300)
    assert verified.returncode == 0 and not verified.stdout.strip(), verified.stdout + verified.stderr


def test_the_packaged_modules_are_the_sources_and_no_others(installed: Path) -> None:
    """Every module under the package's holodesk/ has its file in this tree (built from a copy without
    build/: an in-tree build shipped what an earlier build had left in build/lib)."""
    (namespace,) = PREFIX.glob("lib/python3*/site-packages/holodesk")
    shipped = {path.relative_to(namespace) for path in namespace.rglob("*.py")}
    assert len(shipped) > 100, sorted(shipped)[:10]  # the walk found the modules
    orphans = sorted(str(path) for path in shipped if not (REPO / path).is_file())
    assert not orphans, f"packaged modules without a source file: {orphans}"


def _tray_icon_embedded() -> bool:
    """True when a window of the holodesk client is embedded in the tray host (its parent is not the root)."""
    from Xlib import display

    connection = display.Display()
    try:
        root = connection.screen().root

        def walk(window: object, depth: int) -> bool:
            for child in window.query_tree().children:  # type: ignore[attr-defined]
                try:
                    wm_class = child.get_wm_class()
                except Exception:  # a window gone meanwhile
                    continue
                if depth > 0 and wm_class == ("holodesk", "Holodesk"):
                    return True
                if walk(child, depth + 1):
                    return True
            return False

        return walk(root, 0)
    finally:
        connection.close()


def test_the_packaged_app_shows_its_tray_icon_and_runs_a_task(installed: Path, xvfb, tmp_path: Path) -> None:
    host = subprocess.Popen(["trayer", "--edge", "top", "--align", "right", "--width", "10"])
    sessions = tmp_path / "sessions"
    with FakeOpenAIServer() as server:
        server.queue(Completion(holotron("answer", content="The menu is open.")))
        config = tmp_path / "config" / "holodesk"
        config.mkdir(parents=True)
        (config / "settings.toml").write_text(
            f'[model]\nbackend = "remote"\n\n[model.remote]\nbase_url = "{server.base_url}"\n\n'
            f'[sessions]\nfolder = "{sessions}"\n',
            encoding="utf-8",
        )
        env = {
            "HOME": str(tmp_path),
            "PATH": "/usr/bin:/bin",  # the package's command, not this venv's
            "DISPLAY": os.environ["DISPLAY"],
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_RUNTIME_DIR": str(tmp_path),
            "HOLODESK_INSTANCE_NAME": f"deb-{os.getpid()}",
        }
        wait_until(lambda: selection_owned("_NET_SYSTEM_TRAY_S0"), 60, "trayer owning the tray selection")
        app = subprocess.Popen(["holodesk"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            wait_until(_tray_icon_embedded, 60, "the packaged app's tray icon embedded in trayer")
            prompt = open_prompt_with_the_hotkey()
            xdotool("windowfocus", "--sync", prompt)
            xdotool("type", "--delay", "5", "Open the menu")
            xdotool("key", "Return")
            session = wait_for_session_end(sessions, app, timeout_s=60)
        finally:
            app.terminate()
            try:
                output = app.communicate(timeout=20)[0]
            except subprocess.TimeoutExpired:
                app.kill()
                output = app.communicate()[0]
            host.kill()
            host.wait()
        assert not server.problems, server.problems
        assert server.chat_requests, output  # the task's step went to the server
    assert session.outcome == "done", (session.end, output)
    assert "Traceback" not in output, output


# A user's data as Holodesk writes it: settings, sessions (text and images), a private file.
USER_DATA = {
    ".config/holodesk/settings.toml": (b'[model]\nprofile = "holo4"\n', 0o644),
    ".config/holodesk/routines/weekly.toml": (b'name = "weekly"\n', 0o644),
    ".local/share/holodesk/sessions/2026-01-01T10-00-00/steps.jsonl": (b'{"step": 1}\n', 0o644),
    ".local/share/holodesk/sessions/2026-01-01T10-00-00/step-001.png": (bytes(range(256)) * 4, 0o644),
    ".local/share/holodesk/history.db": (b"\x00\x01private\xff", 0o600),
}
USER_FOLDERS = (".config/holodesk", ".local/share/holodesk")


def _write_user_data(home: Path, uid: int, gid: int) -> None:
    for relative, (content, mode) in USER_DATA.items():
        path = home / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        path.chmod(mode)
    for folder in USER_FOLDERS:
        for path in [home / folder, *(home / folder).rglob("*")]:
            os.chown(path, uid, gid)
    for path in (home / ".config", home / ".local", home / ".local/share"):
        os.chown(path, uid, gid)


def _tree(home: Path) -> dict[str, tuple[str, int, int, int, bytes]]:
    """Every entry of the user's Holodesk folders: kind, mode, owner, group and bytes (a link: its target)."""
    found = {}
    for folder in USER_FOLDERS:
        top = home / folder
        for path in [top, *top.rglob("*")] if top.exists() else []:
            info = path.lstat()
            if path.is_symlink():
                kind, content = "link", os.readlink(path).encode()
            elif path.is_dir():
                kind, content = "dir", b""
            else:
                kind, content = "file", path.read_bytes()
            found[str(path.relative_to(home))] = (kind, info.st_mode, info.st_uid, info.st_gid, content)
    return found


@pytest.fixture
def user_home() -> Iterator[tuple[str, Path]]:
    """A real user of this machine, made for the test with useradd (its home under /home) and removed after."""
    name = f"hdpurge{os.getpid()}"
    made = _run("useradd", "--create-home", "--shell", "/bin/sh", name, timeout=60)
    assert made.returncode == 0, made.stdout + made.stderr
    try:
        yield name, Path(pwd.getpwnam(name).pw_dir)
    finally:
        removed = _run("userdel", "--remove", name, timeout=60)
        assert removed.returncode == 0, removed.stdout + removed.stderr


@pytest.fixture
def root_home() -> Iterator[Path]:
    """Root's own home (apt purges as root, with root's HOME): its Holodesk folders moved aside first if
    they exist, and put back after."""
    home = Path(pwd.getpwuid(0).pw_dir)
    backups = {}
    for folder in USER_FOLDERS:
        if os.path.lexists(home / folder):
            backups[home / folder] = home / f"{folder}.before-test-deb-{os.getpid()}"
            (home / folder).rename(backups[home / folder])
    try:
        yield home
    finally:
        for folder in USER_FOLDERS:
            shutil.rmtree(home / folder, ignore_errors=True)
        for original, backup in backups.items():
            backup.rename(original)


def test_purge_leaves_nothing_but_the_users_data(installed: Path, user_home: tuple[str, Path], root_home: Path) -> None:
    """The users' real folders (a user under /home, and root, who purges) are left byte for byte."""
    name, home = user_home
    account = pwd.getpwnam(name)
    _write_user_data(home, account.pw_uid, account.pw_gid)
    _write_user_data(root_home, 0, 0)
    # The user has run it: the installed command, as that user, in that home.
    used = _run("runuser", "-u", name, "--", "/usr/bin/holodesk", "--help", timeout=60, env=_env_of(home))
    assert used.returncode == 0, used.stdout + used.stderr
    before = {home: _tree(home), root_home: _tree(root_home)}
    files = [{path for path, entry in tree.items() if entry[0] == "file"} for tree in before.values()]
    assert all(set(USER_DATA) <= each for each in files), before  # the check below is not of empty folders
    # Root running it once writes bytecode no package owns, unless the package shipped it all.
    _run("/usr/bin/holodesk", "--help", timeout=60, env=_env_of(root_home))
    # An autostart entry the user copied stays (it is theirs); what it would start must be gone with the package.
    copied = Path("/usr/share/holodesk/holodesk-autostart.desktop").read_text(encoding="utf-8")
    (try_exec,) = re.findall(r"^TryExec=(.+)$", copied, re.M)
    purged = _run("apt-get", "purge", "-y", PACKAGE, env=_env_of(root_home))
    assert purged.returncode == 0, purged.stdout + purged.stderr
    assert not _installed()
    assert not PREFIX.exists(), sorted(str(p) for p in PREFIX.rglob("*"))[:20]
    left = [path for path in SHIPPED if os.path.lexists(path)]
    assert not left, left
    assert not Path("/usr/share/holodesk").exists() and not Path("/usr/share/doc/holodesk").exists()
    assert _run("dpkg-query", "-W", PACKAGE, timeout=30).returncode != 0  # not even config-files state
    assert shutil.which(try_exec) is None, f"a copied autostart entry would still start {try_exec}"
    changed = [str(where) for where, tree in before.items() if _tree(where) != tree]
    assert not changed, f"purging changed the Holodesk folders of {', '.join(changed)}"


def _env_of(home: Path) -> dict[str, str]:
    """The environment with `home` as HOME and no XDG folders pointing elsewhere."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("XDG_")}
    return {**env, "HOME": str(home)}


def test_lintian_finds_nothing_unexplained(lintian: LintianRun) -> None:
    """Last in the module: lintian has run while the others installed, started and purged the package."""
    for check in CHECKS_BELOW_WARNING:  # still true of the installed lintian, or the check must run again
        severities = _severities_of_check(check)
        assert severities and not severities & {"error", "warning"}, f"lintian's {check} can now say {severities}"
    code = lintian.process.wait(timeout=TIMEOUT_S)
    words = lintian.report.read_text(encoding="utf-8", errors="replace")
    assert code == 0, words
    assert not [line for line in words.splitlines() if line[:2] in ("E:", "W:")], words
