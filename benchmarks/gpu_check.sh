#!/usr/bin/env bash
# The one GPU check: run it whenever a GPU is lent (171 s on one H200 before the loader part was added; at most
# 8 minutes: each part's timeout is cut to what is left of a 470-second budget).
#   bash benchmarks/gpu_check.sh            # from the repository root
# 1. the CUDA-marked tests (tests/cuda: forward/backward = CPU, bf16 autocast, DDP over NCCL, training on the
#    GPU, --compile, a streamed epoch);
# 2. benchmarks/bench_core.py --device cuda: the bf16 matmul peak, then vitlab against timm in the same process
#    (forward of ViT-Ti/16, train steps of vit-seed and ViT-B/16: images/s and the fraction of the peak);
# 3. benchmarks/bench_data.py: the streaming loader on 2,000 generated 224-320 px JPEGs, 8 workers: images/s of
#    the CPU path and of data.decode=gpu (JPEGs decoded and cropped on the GPU) against the decode-only limit,
#    and each stage's CPU ms per image (about 2 minutes, the photos made once under $TMPDIR).
# Each part's output goes to stdout and, when $OUT is set, to $OUT/gpu_check_*.txt (bench_core's and bench_data's
# JSON to $OUT/bench_core.jsonl and $OUT/bench_data.jsonl). On a machine without CUDA it says so and exits 0.
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
if ! "$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    echo "gpu_check: no CUDA device (torch.cuda.is_available() is False): skipped"
    exit 0
fi
out=${OUT:-}
budget=470  # seconds for the whole script, so it ends within 8 minutes by construction
limit() { local left=$((budget - SECONDS)); echo $((left < $1 ? (left > 1 ? left : 1) : $1)); }  # a part's timeout
log() { if [ -n "$out" ]; then tee "$out/$1"; else cat; fi; }
"$python" -c 'import torch; print("gpu_check:", torch.cuda.get_device_name(), "torch", torch.__version__, "CUDA", torch.version.cuda)' | log gpu_check_device.txt
status=0
timeout "$(limit 300)" "$python" -m pytest -n 0 -m cuda tests/cuda -p no:cacheprovider -q -rs 2>&1 | log gpu_check_tests.txt || status=1
timeout "$(limit 200)" "$python" benchmarks/bench_core.py --device cuda --rounds 3 2>&1 | log bench_core.jsonl || status=1
timeout "$(limit 200)" "$python" benchmarks/bench_data.py --only loader stages --device cuda --images 2000 --workers 8 \
    --seconds 3 --rounds 2 --warmup 3 --peers vitlab vitlab-decode-gpu decode-pil decode-tv --stage-images 100 \
    --cache "${TMPDIR:-/tmp}/vitlab-bench" | log bench_data.jsonl || status=1
echo "gpu_check: done (exit $status)"
exit $status
