#!/usr/bin/env bash
# The prepared CUDA check: one short run on a lent GPU machine that has no network and no real weights.
#
#   bash bench/gpu_check.sh [PART...]  (from the repository root; results go to $OUT, or /tmp/gpu-check)
#
# It needs Python wheels the machine may lack in .whl/: transformers at the pinned version and mss, and the
# Triton kernels (mamba-ssm built without its CUDA part, fla-core):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 \
#       -d .whl transformers==5.19.0 mss==10.2.0 fla-core==0.6.0
#   MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE pip wheel --no-deps --no-build-isolation -w .whl mamba-ssm==2.3.1
# The kernels go to a site of their own, so that a part can run with them and without them side by side.
# With the repository on the import path (a `holodesk` folder of links stands in for the install):
# 1. the GPU, torch, CUDA and transformers versions, and whether the kernels load (inference/engine/kernels.py);
# 2. parity: bench.cuda_parity, the engines on CUDA (float32, bf16; kernels and CUDA graphs in place) against
#    the CPU on realistic tiny checkpoints;
# 3. qwen: bench.qwen35_gpu_step, a Holo3.1-0.8B-shaped step with the CUDA paths, then with transformers'
#    code (no kernels), side by side;
# 4. holotron: a random-weight checkpoint with Holotron-12B's real shapes, drawn on the GPU
#    (bench.nemotron_tiny's "holotron-12b-shapes": 13.2 billion parameters, 24.5 GiB in bf16), then
#    bench.gpu_step on it three ways: as the engine ships (Triton kernels, decode as CUDA graphs), the kernels
#    with transformers' decode, and neither;
# 5. tiling: the tiler's CUDA test (the one test the CPU suite skips).
# PARTs (parity, qwen, holotron, tiling) choose some; none runs them all. Each part's log goes to $OUT.
# PARITY_FAMILY=holotron or qwen3.5 limits the parity part to one family.
set -uo pipefail
out=${OUT:-/tmp/gpu-check}
mkdir -p "$out"
base=/tmp/holodesk-site
kernels=/tmp/holodesk-kernels
checkpoint=/tmp/holotron-12b-shapes

wheels=(.whl/*.whl)
kernel_wheels=(.whl/mamba_ssm-*.whl .whl/fla_core-*.whl)
plain=()
for wheel in "${wheels[@]}"; do [[ " ${kernel_wheels[*]} " == *" $wheel "* ]] || plain+=("$wheel"); done
pip_install() { python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$@"; }
pip_install "$base" "${plain[@]}" || { echo "gpu_check: the wheels in .whl/ did not install" >&2; exit 2; }
pip_install "$kernels" "${kernel_wheels[@]}" || echo "gpu_check: the kernel wheels did not install" >&2
mkdir -p "$base/holodesk"
for part in app automation inference assets; do ln -sfn "$PWD/$part" "$base/holodesk/$part"; done
export OMP_WAIT_POLICY=PASSIVE PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
with_kernels="$kernels:$base:$PWD"
without="$base:$PWD"
export PYTHONPATH="$with_kernels"

nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv
python3 -c "import torch, transformers, triton; print('torch', torch.__version__, 'CUDA', torch.version.cuda,
'transformers', transformers.__version__, 'triton', triton.__version__, 'bf16', torch.cuda.is_bf16_supported())"
python3 -c "
from holodesk.inference.engine.kernels import load_fla, load_mamba
for load in (load_mamba(), load_fla()):
    print(load.package, load.how, sorted(load.functions))
"

wants() { [ -z "$parts" ] || [[ " $parts " == *" $1 "* ]]; }
parts="$*"
quiet='^{\|^\[transformers\]\|Loading weights\|falling back'

if wants parity; then
    timeout 200 python3 -m bench.cuda_parity ${PARITY_FAMILY:+--family "$PARITY_FAMILY"} --output "$out/cuda_parity.json" 2>&1 | grep --line-buffered -v "$quiet" | tee "$out/parity.log"
fi
if wants qwen; then
    for how in fast reference; do
        flag=$([ $how = reference ] && echo --reference)
        path=$([ $how = reference ] && echo "$without" || echo "$with_kernels")
        echo "== qwen35_gpu_step ($how)"
        PYTHONPATH="$path" timeout 120 python3 -m bench.qwen35_gpu_step $flag --output "$out/qwen35_$how.json" 2>&1 \
            | grep --line-buffered -v "$quiet" | tee "$out/qwen35_$how.log"
    done
fi
if wants holotron; then
    start=$(date +%s)
    python3 -c "
from pathlib import Path
from bench.nemotron_tiny import build_nemotron_tiny
build_nemotron_tiny(Path('$checkpoint'), variant='holotron-12b-shapes', device='cuda')
" || exit 3
    echo "checkpoint built in $(($(date +%s) - start)) s: $(du -sh $checkpoint | cut -f1)"
    # The engine as it ships (Triton kernels, static decode as CUDA graphs), then the same kernels with
    # transformers' decode, then neither (transformers' PyTorch scan and forward).
    for how in graphs triton torch; do
        path=$([ $how = torch ] && echo "$without" || echo "$with_kernels")
        flag=$([ $how = graphs ] || echo --transformers-decode)
        echo "== gpu_step ($how)"
        PYTHONPATH="$path" timeout 150 python3 -m bench.gpu_step "$checkpoint" --steps 2 --warmup 1 $flag \
            --max-new-tokens 64 --output "$out/gpu_step_$how.json" 2>&1 | tail -c 20000 | tee "$out/gpu_step_$how.log" \
            | grep --line-buffered -v "$quiet"
    done
fi
wants tiling && python3 -m pytest -q -p no:cacheprovider --noconftest tests/inference/test_tiling.py -k cuda 2>&1 | tail -3
exit 0
