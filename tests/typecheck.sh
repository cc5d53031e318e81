#!/usr/bin/env bash
# Type-checks Holodesk as it is installed (holodesk.app, holodesk.automation, holodesk.inference).
# mypy cannot follow setuptools' editable mapping of holodesk.app -> app/, so it reads a tree of
# symbolic links under build/typecheck instead; pyproject.toml's [tool.mypy] has the settings.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/typecheck/holodesk
for package in app automation inference; do
  ln -sfn "../../../$package" "build/typecheck/holodesk/$package"
done
exec "${MYPY:-.venv/bin/mypy}" "$@"
