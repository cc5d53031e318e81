#!/usr/bin/env bash
# Lint, formatting and types: the checks tests/run.sh runs before the tests, on their own.
# Both checkers keep caches in the repository (.ruff_cache, .mypy_cache; git-ignored), so a second
# run checks only what changed. Needs the lint extra: bash tests/run.sh once, or
# .venv/bin/pip install -e ".[test,lint]".
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/ruff check .
.venv/bin/ruff format --check .  # one layout for everyone: `ruff format .` fixes what this reports
bash tests/typecheck.sh  # mypy: strict on automation/, default elsewhere
