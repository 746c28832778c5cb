#!/usr/bin/env bash
# The CUDA slice's checks, in one go, on a machine with a GPU (see README.md beside this file):
#   1. build the trainer with -DEVOSCALE_CUDA=ON (skipped with --no-build: use BUILD_DIR as is,
#      e.g. one built on a machine without a GPU and carried over);
#   2. run the gpu-labelled tests (GPU against CPU: lookups, sparse updates, MLP, training curve);
#   3. train on the same data with --device cpu and --device cuda and print both final lines and
#      the speedup.
#
#   bench/trainer/gpu_check.sh [--no-build] [BUILD_DIR (build-gpu)] [WORK_DIR (/tmp/evoscale-ctr)]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build_it=1
if [ "${1:-}" = "--no-build" ]; then build_it=0; shift; fi
build="${1:-$root/build-gpu}"
work="${2:-/tmp/evoscale-ctr}"
jobs="$(nproc)"

say() { printf '[gpu_check] %s\n' "$*" >&2; }

if ! nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; then
  say "nvidia-smi finds no GPU: nothing to check here"
  exit 1
fi

if [ "$build_it" = 1 ]; then
  nvcc="$(command -v nvcc || true)"
  [ -n "$nvcc" ] || nvcc="$(ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
  [ -n "$nvcc" ] || { say "no nvcc on PATH or in /usr/local/cuda/bin"; exit 1; }
  "$nvcc" --version | tail -1
  start=$(date +%s)
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEVOSCALE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DEVOSCALE_TEST_DIRS=trainer -DEVOSCALE_BENCH_DIRS=trainer >/dev/null
  cmake --build "$build" -j "$jobs" --target evoscale_trainer_main trainer_test trainer_gpu_test
  say "build: $(( $(date +%s) - start )) s"
fi

say "gpu tests"
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 300
# A run where every gpu test skipped would pass too: make sure they ran.
if ctest --test-dir "$build" -L gpu --timeout 300 2>&1 | grep -q "Skipped"; then
  say "gpu tests were skipped: the test binary sees no CUDA device"
  exit 1
fi

trainer="$build/bin/evoscale-trainer"
gen="$root/../shared/bench/ctr/gen_synth.py"
data=()
if [ -f "$work/train200k.tsv" ] && [ -f "$work/test50k.tsv" ]; then
  data=(--train "$work/train200k.tsv" --test "$work/test50k.tsv")
elif [ -f "$gen" ] && command -v python3 >/dev/null; then
  mkdir -p "$work"
  python3 "$gen" 200000 1 "$work/train200k.tsv"
  python3 "$gen" 50000 2 "$work/test50k.tsv"
  data=(--train "$work/train200k.tsv" --test "$work/test50k.tsv")
else
  say "no 200k file and no gen_synth.py: using the built-in generator (--synthetic 200000)"
  data=(--synthetic 200000)
fi

run() {  # device batch threads
  "$trainer" "${data[@]}" --embedding-dim 16 --batch-size "$2" --threads "$3" --device "$1" \
    --progress-every 0 | tail -1
}
rate() { sed -n 's/.*"examples_per_s":\([0-9.]*\).*/\1/p'; }

say "throughput, dim 16, one epoch (same data, seed and model on both devices)"
cpu=$(run cpu 1024 2);    echo "cpu  batch 1024, 2 threads: $cpu"
gpu=$(run cuda 1024 1);   echo "cuda batch 1024:            $gpu"
gpu8=$(run cuda 8192 1);  echo "cuda batch 8192:            $gpu8"
c=$(rate <<<"$cpu"); g=$(rate <<<"$gpu"); g8=$(rate <<<"$gpu8")
echo "{\"cpu_examples_per_s\":$c,\"cuda_examples_per_s\":$g,\"cuda_batch8192_examples_per_s\":$g8,\"speedup_batch1024\":$(awk -v a="$g" -v b="$c" 'BEGIN{printf "%.2f", a/b}')}"
