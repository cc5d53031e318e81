#!/usr/bin/env bash
# Builds dist/holodesk_<version>_amd64.deb: the tray app and the `holodesk` command (remote backend)
# in a private venv of PyPI wheels under /usr/lib/holodesk (Debian 12 has no PySide6 package), built on
# Debian's own /usr/bin/python3 so the package depends on nothing but Debian packages.
#
#   packaging/debian/build-deb.sh [OUTPUT_FOLDER]     (default: dist/)
#
# Needs: python3 (Debian's), dpkg-deb (it sets every file's owner to root: no fakeroot), and
# the repository's .venv (its pip builds the wheel and installs into the staged venv; pip reaches PyPI
# or the configured index). tests/packaging/test_deb.py builds, lints, installs, runs and purges it.
set -euo pipefail
# The venv must see only itself: with a PYTHONPATH naming this repository (the tests set one), pip
# would find Holodesk "already satisfied" and leave it out of the package.
unset PYTHONPATH PYTHONHOME PYTHONUSERBASE
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="$(mkdir -p "${1:-$repo/dist}" && cd "${1:-$repo/dist}" && pwd)"
host_python="$repo/.venv/bin/python"
system_python=/usr/bin/python3
prefix=/usr/lib/holodesk
revision=1  # the Debian revision: bump it for a new package of the same Holodesk version
version="$("$host_python" -c 'import tomllib; print(tomllib.load(open("'"$repo"'/pyproject.toml", "rb"))["project"]["version"])')"

stage="$(mktemp -d "${TMPDIR:-/tmp}/holodesk-deb.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
venv="$root$prefix"

echo "building holodesk $version: the wheel"
# From a copy without build/: setuptools ships again whatever an earlier build left in build/lib (a
# module since deleted or renamed), so an in-tree build can package files the source no longer has.
"$host_python" - "$repo" "$stage/source" <<'COPY'
import shutil, sys
left_out = (".git", ".venv*", "build", "dist", "*.egg-info", ".*_cache", "__pycache__")
shutil.copytree(sys.argv[1], sys.argv[2], ignore=shutil.ignore_patterns(*left_out), symlinks=True)
COPY
"$host_python" -m pip wheel -q --no-deps --no-build-isolation -w "$stage/wheels" "$stage/source"

echo "the venv in $prefix (Debian's $("$system_python" --version))"
"$system_python" -m venv --without-pip "$venv"
# pip into the venv too: the in-process extra is installed with its bin/pip (the man page and README say
# how; not python's -m as root, which puts the current folder first on the module path).
# A cache of its own: a wheel this machine once built from source for another Python (evdev, under
# pyenv) would carry that Python's library path (RUNPATH); here every such wheel is built anew.
PIP_CACHE_DIR="$stage/pip-cache" "$host_python" -m pip --python "$venv/bin/python" install -q \
  --no-warn-script-location --no-compile pip "$stage"/wheels/holodesk-*.whl
test -x "$venv/bin/holodesk" || { echo "error: pip did not install holodesk into the venv" >&2; exit 1; }

# The venv was made at the staging path: point its scripts and pyvenv.cfg at the installed one.
grep -rlI --null "$venv" "$venv" | xargs -0 -r sed -i "s|$venv|$prefix|g"
# Not for a packaged app: activation scripts (a developer's shell) and PySide6's developer tools
# (designer, deploy, uic wrappers: Holodesk builds its windows in code).
rm -rf "$venv"/bin/activate* "$venv"/bin/Activate.ps1 "$venv"/bin/pyside6-* "$venv"/lib/python3*/site-packages/PySide6/scripts
# Debian's modes: libraries and modules are not executables (wheels set +x on many).
find "$venv/lib" -type f \( -name '*.so' -o -name '*.so.*' -o -name '*.py' \) -exec chmod 644 {} +
# No bytecode in the package (Debian's rule): postinst compiles it, prerm removes it (py3compile's way).
find "$venv" -name __pycache__ -type d -prune -exec rm -rf {} +

# Relative links, as Debian wants: the venv's interpreter links (to /usr/bin/python3) and the command.
for link in "$venv"/bin/*; do
  target="$(readlink "$link" || true)"
  case "$target" in /usr/*) ln -sfn "../../..${target#/usr}" "$link" ;; esac
done
install -d "$root/usr/bin"
ln -s "../lib/holodesk/bin/holodesk" "$root/usr/bin/holodesk"
install -D -m 644 "$repo/packaging/linux/holodesk.desktop" "$root/usr/share/applications/holodesk.desktop"
install -D -m 644 "$repo/packaging/linux/holodesk-new-task.desktop" \
  "$root/usr/share/applications/holodesk-new-task.desktop"
# The autostart choice is the user's: the entry ships here, and `cp` into ~/.config/autostart turns it on.
install -D -m 644 "$repo/packaging/linux/holodesk-autostart.desktop" "$root/usr/share/holodesk/holodesk-autostart.desktop"
install -D -m 644 "$repo/assets/icons/holodesk.svg" "$root/usr/share/icons/hicolor/scalable/apps/holodesk.svg"
install -D -m 644 "$here/io.github.holodesk.Holodesk.metainfo.xml" \
  "$root/usr/share/metainfo/io.github.holodesk.Holodesk.metainfo.xml"
# The optional parts' packages, from pyproject.toml's extras: the in-process backend (holotron),
# `holodesk eval miniwob` (eval) and `--ray` (cluster). Holodesk's own advice names these files when it
# runs from this package (app/common/install_advice.py), never `pip install 'holodesk[...]'`.
for extra in holotron eval cluster; do
  "$host_python" - "$repo/pyproject.toml" "$extra" > "$stage/$extra-requirements.txt" <<'PY'
import sys, tomllib
name = sys.argv[2]
extra = tomllib.load(open(sys.argv[1], "rb"))["project"]["optional-dependencies"][name]
what = {"holotron": "The in-process backend (a GPU in this computer)", "eval": "holodesk eval miniwob",
        "cluster": "holodesk eval miniwob --ray and holodesk annotate --ray"}[name]
print(f"# {what}: sudo /usr/lib/holodesk/bin/pip install -r /usr/share/holodesk/{name}-requirements.txt")
print("# (the environment's own pip: `python -m pip` as root would first run a pip.py in the current folder)")
print("\n".join(extra))
PY
  install -D -m 644 "$stage/$extra-requirements.txt" "$root/usr/share/holodesk/$extra-requirements.txt"
done

install -d "$root/usr/share/man/man1"
"$host_python" "$here/manpage.py" | gzip -9n > "$root/usr/share/man/man1/holodesk.1.gz"
doc="$root/usr/share/doc/holodesk"
install -D -m 644 "$here/copyright" "$doc/copyright"
sed "s/@VERSION@/$version-$revision/" "$here/changelog" | gzip -9n > "$doc/changelog.Debian.gz"
chmod 644 "$doc/changelog.Debian.gz" "$root/usr/share/man/man1/holodesk.1.gz"

install -d "$root/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
sed -e "s/@VERSION@/$version-$revision/" -e "s/@SIZE@/$size/" "$here/control.in" > "$root/DEBIAN/control"
for script in postinst prerm postrm; do install -m 755 "$here/$script" "$root/DEBIAN/$script"; done
install -D -m 644 "$here/lintian-overrides" "$root/usr/share/lintian/overrides/holodesk"
# Every shipped file's checksum (dpkg --verify and debsums read it), as dh_md5sums writes it.
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | LC_ALL=C sort -z | xargs -0 md5sum) \
  > "$root/DEBIAN/md5sums"
chmod 644 "$root/DEBIAN/md5sums"
# Reproducible-ish: every file dated from the last commit.
epoch="$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)"
find "$root" -exec touch -h -d "@$epoch" {} +
deb="$out/holodesk_${version}-${revision}_amd64.deb"
dpkg-deb --root-owner-group -Zgzip -z6 --build "$root" "$deb" > /dev/null
echo "$deb"
