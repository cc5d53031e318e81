#!/usr/bin/env bash
# The prepared CUDA check: one short run on a lent GPU machine that has no network and no real weights.
#
#   bash bench/gpu_check.sh [PART...]  (from the repository root; results go to $OUT, or /tmp/gpu-check)
#
# It needs Python wheels the machine may lack in .whl/ (transformers at the pinned version, mss):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl transformers==5.19.0 mss==10.2.0
# Then, with the repository on the import path (a `holodesk` folder of links stands in for the install):
# 1. the GPU, torch, CUDA and transformers versions;
# 2. a random-weight checkpoint with Holotron-12B's real shapes, drawn on the GPU (bench.nemotron_tiny's
#    "holotron-12b-shapes"): 13.2 billion parameters, 24.5 GiB in bf16;
# 3. bench.gpu_step on it: the engine's first contact (degenerate answer, prefill tokens/s, decode ms/token
#    against the bandwidth floor, peak memory, kernels in use), then timed steps with the history growing,
#    and the memory planned before loading next to the peak measured;
# 4. the tiler's CUDA test (the one test the CPU suite skips);
# 5. bench.cuda_parity: the engines on CUDA (float32, bf16) against the CPU on realistic tiny checkpoints;
# 6. bench.qwen35_gpu_step: a Holo3.1-0.8B-shaped step through the in-process engine.
# PARTs (holotron: 2-3, tiling: 4, parity: 5, qwen: 6) choose some; none runs them all.
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
site=/tmp/holodesk-site
checkpoint=/tmp/holotron-12b-shapes

python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl \
    || { echo "gpu_check: the wheels in .whl/ did not install" >&2; exit 2; }
mkdir -p "$site/holodesk"
for part in app automation inference assets; do ln -sfn "$PWD/$part" "$site/holodesk/$part"; done
export PYTHONPATH="$site:$PWD" OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
python3 -c "import torch, transformers; print('torch', torch.__version__, 'CUDA', torch.version.cuda,
'transformers', transformers.__version__, 'bf16', torch.cuda.is_bf16_supported(),
'flash sdpa', torch.backends.cuda.flash_sdp_enabled())"

wants() { [ -z "$parts" ] || [[ " $parts " == *" $1 "* ]]; }
parts="$*"  # holotron, tiling, parity, qwen: the parts to run (all when none is named)

if wants holotron; then
    start=$(date +%s)
    python3 -c "
from pathlib import Path
from bench.nemotron_tiny import build_nemotron_tiny
build_nemotron_tiny(Path('$checkpoint'), variant='holotron-12b-shapes', device='cuda')
" || exit 3
    echo "checkpoint built in $(($(date +%s) - start)) s: $(du -sh $checkpoint | cut -f1)"
    python3 -m bench.gpu_step "$checkpoint" --steps 4 --warmup 1 --max-new-tokens 64 --output "$out/gpu_step.json" \
        2>&1 | tail -c 20000 | tee "$out/gpu_step.log" | grep -v '^{'
fi
quiet='^{\|^\[transformers\]\|Loading weights'
wants tiling && python3 -m pytest -q -p no:cacheprovider --noconftest tests/inference/test_tiling.py -k cuda 2>&1 | tail -3
wants parity && python3 -m bench.cuda_parity --output "$out/cuda_parity.json" 2>&1 | grep -v "$quiet"
wants qwen && python3 -m bench.qwen35_gpu_step --output "$out/qwen35_gpu_step.json" 2>&1 | grep -v "$quiet"
exit 0
