#!/usr/bin/env bash
# The CUDA path's checks for a session that is lent a GPU machine (see README.md beside this
# file). That machine has CUDA 13 and the driver but none of our Debian libraries, so the
# binaries are built here and travel, with the shared libraries they need, in one git-ignored
# folder that the device call carries:
#
#   bench/trainer/gpu_check.sh pack [BUILD_DIR (build-gpu)]        here, on a machine with nvcc
#       Release build with -DEVOSCALE_CUDA=ON of evoscale-trainer, trainer_gpu_test and
#       gpu_table_bench only (MPI left out); copies them, stripped, into gpu-pack/ with every
#       shared library they load that a stock CUDA machine lacks; prints the folder's size, the
#       device command and its carry list, and what that command would run (--dry-run).
#   bash gpu-pack/run.sh [--dry-run]                                there, from the repository root
#       (= gpu_check.sh run gpu-pack): nvidia-smi; the gpu tests, failing on any skip; the GPU
#       table's find / find-or-insert rates; the trainer on its own synthetic data with
#       --device cuda and --device cpu --threads $(nproc), same seed and epochs: both final
#       lines, the examples/s ratio and the AUC difference; a job of two GPU processes over
#       NCCL (ranks from the environment, each its own NCCL_HOSTID on the one GPU) against one
#       process on GPU_CHECK_NCCL_ROWS (200000) rows, AUC within 0.003; the same job with rank 1
#       killed, rank 0 ending non-zero within 10 s. Each step under `timeout`, all of
#       them within GPU_CHECK_BUDGET_S (300 s). Writes gpu_check.txt and the logs to $OUT when
#       set. Exit status 1 when anything failed, was skipped or timed out.
#
# Knobs (environment): JOBS (pack: build jobs, default nproc); GPU_CHECK_ROWS (4000000 synthetic
# rows), GPU_CHECK_BATCH (1024), GPU_CHECK_BUDGET_S (300), GPU_CHECK_AUC_TOLERANCE (0.005),
# GPU_CHECK_NCCL_ROWS (200000), GPU_CHECK_NCCL_AUC_TOLERANCE (0.003).
set -euo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
say() { printf '[gpu_check] %s\n' "$*"; }
# In run mode the reason also goes to $OUT/gpu_check.txt, the file the device call brings back.
die() {
  say "$*" >&2
  if [ "${mode:-}" = run ] && [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
    printf 'FAILED: %s\n' "$*" >>"$OUT/gpu_check.txt"
  fi
  exit 1
}

# The binaries the pack carries (CMake target, file name under bin/).
readonly targets=(evoscale_trainer_main trainer_gpu_test gpu_table_bench)
readonly binaries=(evoscale-trainer trainer_gpu_test gpu_table_bench)
readonly device_timeout_s=360
readonly pack_name=gpu-pack

# ---------------------------------------------------------------------------------------------
# pack (here)

# True for a library every CUDA machine has, which the pack must not carry: glibc and the
# loader, GCC's C++ runtime (the machine's is as new or newer), and the driver's libcuda and
# libnvidia-*, which must match the kernel module there.
provided_there() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libutil.so.* | libresolv.so.* | libstdc++.so.* | libgcc_s.so.* | \
      libcuda.so.* | libnvidia-*.so.*)
      return 0 ;;
  esac
  return 1
}

# Copies into $1 every library the binaries $2... load that provided_there rejects, and lists
# them ("name <- path") on stdout. Fails on a library the loader cannot find here.
copy_libraries() {
  local lib_dir=$1 bin name arrow path rest
  shift
  declare -A seen=()
  for bin in "$@"; do
    while read -r name arrow path rest; do
      [ "$arrow" = "=>" ] || continue  # the vdso and the loader: no path to copy
      [ "$path" != "not" ] || die "$bin: $name not found here"
      provided_there "$name" && continue
      [ -z "${seen[$name]:-}" ] || continue
      seen[$name]=1
      cp -L "$path" "$lib_dir/$name"
      printf '%s <- %s\n' "$name" "$(readlink -f "$path")"
    done < <(ldd "$bin")
  done
}

# The absolute path of $1 (which need not exist yet), relative to the current directory.
absolute() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s/%s\n' "$PWD" "$1" ;; esac; }

pack() {
  local root build pack_dir nvcc jobs start
  root="$(cd "$script_dir/../.." && pwd)"
  build="$(absolute "${1:-$root/build-gpu}")"
  pack_dir="$root/$pack_name"
  jobs="${JOBS:-$(nproc)}"
  nvcc="$(command -v nvcc || true)"
  [ -n "$nvcc" ] || nvcc="$(ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)"
  [ -n "$nvcc" ] || die "no nvcc on PATH or in /usr/local/cuda/bin: pack on a machine with CUDA"
  say "nvcc: $("$nvcc" --version | tail -1)"

  # The trainer's folders only; MPI left out: the GPU path never calls it, and Open MPI would
  # need its plugins and launcher there too (its libraries alone only satisfy the loader).
  start=$(date +%s)
  mkdir -p "$build"
  local configure_log="$build/gpu_check_configure.log"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DEVOSCALE_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" -DEVOSCALE_TEST_DIRS=trainer -DEVOSCALE_BENCH_DIRS=trainer \
    -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$configure_log" 2>&1 ||
    { tail -30 "$configure_log"; die "configure failed: $configure_log"; }
  cmake --build "$build" -j "$jobs" --target "${targets[@]}"
  say "build: $(( $(date +%s) - start )) s in $build"

  rm -rf "$pack_dir"
  mkdir -p "$pack_dir/bin" "$pack_dir/lib"
  local b
  for b in "${binaries[@]}"; do
    cp "$build/bin/$b" "$pack_dir/bin/$b"
    strip --strip-unneeded "$pack_dir/bin/$b"
  done
  local libs
  libs="$(copy_libraries "$pack_dir/lib" "${binaries[@]/#/$pack_dir/bin/}")"
  cp "$script_dir/gpu_check.sh" "$pack_dir/gpu_check.sh"
  cat >"$pack_dir/run.sh" <<'EOF'
#!/usr/bin/env bash
# Run on the GPU machine, from the repository root: bash gpu-pack/run.sh [--dry-run]
# (written by bench/trainer/gpu_check.sh pack; MANIFEST beside this file says what is here).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
exec bash "$here/gpu_check.sh" run "$here" "$@"
EOF
  chmod +x "$pack_dir/run.sh" "$pack_dir/gpu_check.sh"
  write_manifest "$root" "$build" "$nvcc" "$libs" >"$pack_dir/MANIFEST"

  local bytes
  bytes=$(du -sb "$pack_dir" | cut -f1)
  say "packed $pack_name/: $(awk -v b="$bytes" 'BEGIN{printf "%.1f MiB", b/1048576}') ($bytes bytes)"
  (cd "$pack_dir" && ls -l bin lib | awk 'NF>=9{printf "  %10d  %s\n", $5, $9}')
  # The working tree travels too, and all of it must stay under 64 MiB.
  (( bytes < 40 * 1048576 )) || die "$pack_name/ is $bytes bytes: too close to the 64 MiB limit"
  git -C "$root" check-ignore -q "$pack_name/" ||
    die "$pack_name/ is not git-ignored: it would travel as part of the tree"

  say "device command (the run tool, from the repository root):"
  printf '  command:   bash %s/run.sh\n  carry:     ["%s"]\n  timeout_s: %d\n' \
    "$pack_name" "$pack_name" "$device_timeout_s"
  say "what it would run there (bash $pack_name/run.sh --dry-run, here):"
  bash "$pack_dir/run.sh" --dry-run
}

# What is in the pack and where it came from, for the report and for whoever runs it later.
write_manifest() {
  local root=$1 build=$2 nvcc=$3 libs=$4 rev code
  rev="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  if [ -n "$(git -C "$root" status --porcelain 2>/dev/null)" ]; then
    rev="$rev + uncommitted changes"
  fi
  code="$(grep -o -- '--generate-code=[^ ]*' "$build/build.ninja" | sed 's/--generate-code=//' |
    sort -u | paste -sd' ')"
  cat <<EOF
packed: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release && echo "$PRETTY_NAME"))
source: $rev
build:  $build (Release, EVOSCALE_CUDA=ON, no MPI), $("$nvcc" --version | tail -1)
cuda code: $code
binaries (stripped): ${binaries[*]}
libraries carried (lib/, first on LD_LIBRARY_PATH there):
$(printf '%s\n' "$libs" | sed 's/^/  /')
left to the machine: glibc, libstdc++, libgcc_s, the driver (libcuda, libnvidia-*), and cuBLAS
  (libcublas.so.13 + libcublasLt.so.13, about 600 MB, opened with dlopen on first use: run
  finds the machine's copy and puts its folder after lib/), and NCCL (libnccl.so.2, 218 MB, opened
  on first use by a job of several GPU processes: run finds the machine's and passes it as
  EVOSCALE_NCCL_LIBRARY)
EOF
}

# ---------------------------------------------------------------------------------------------
# run (there)

failures=()
fail() { failures+=("$*"); say "FAILED: $*"; }

# The folder holding the machine's libcublas.so.13, or nothing.
find_cublas_dir() {
  local path
  path="$(ldconfig -p 2>/dev/null | awk '$1 == "libcublas.so.13" {print $NF; exit}')"
  if [ -z "$path" ]; then
    path="$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/local /opt /usr/lib \
      -name 'libcublas.so.13' -print -quit 2>/dev/null || true)"
  fi
  [ -z "$path" ] || dirname "$path"
}

# step NAME LIMIT_S CMD...: runs CMD under timeout, limited to the smaller of LIMIT_S and what
# is left of the budget, with its output in $logs/NAME.log; sets step_rc (124: timed out).
step() {
  local name=$1 limit=$2 left t0
  shift 2
  left=$(( deadline - $(date +%s) ))
  if (( limit > left )); then limit=$left; fi
  say "$name (limit ${limit} s): $(printf '%q ' "$@")"
  step_rc=0
  if (( dry_run )); then return 0; fi
  if (( limit < 5 )); then
    step_rc=124
    fail "$name: no time left in the ${budget} s budget"
    return 0
  fi
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" >"$logs/$name.log" 2>&1 || step_rc=$?
  say "$name: exit $step_rc after $(( $(date +%s) - t0 )) s"
  if (( step_rc == 124 || step_rc == 137 )); then fail "$name: timed out after $limit s"; fi
  return 0
}

# "ran passed skipped failed" from a gtest log; skipped and failed are the larger of the
# summary's figure and the number of per-test result lines ("[  SKIPPED ] Suite.Test (0 ms)").
gtest_counts() {
  awk '
    /^\[==========\] [0-9]+ tests? from .* ran\./ { ran = $2 }
    /^\[  PASSED  \] [0-9]+ tests?\./            { passed = $4 }
    /^\[  SKIPPED \] [0-9]+ tests?, listed below/ { skipped = $4 }
    /^\[  SKIPPED \] [^ ]+ \([0-9]+ ms\)/        { skip_lines++ }
    /^\[  FAILED  \] [0-9]+ tests?, listed below/ { failed = $4 }
    /^\[  FAILED  \] [^ ]+ \([0-9]+ ms\)/        { fail_lines++ }
    END {
      if (skip_lines > skipped) skipped = skip_lines
      if (fail_lines > failed) failed = fail_lines
      printf "%d %d %d %d\n", ran, passed, skipped, failed
    }' "$1"
}

run_gpu_tests() {
  local bin="$pack/bin/trainer_gpu_test" listed ran passed skipped failed
  step gpu_test 120 "$bin" --gtest_color=no
  (( dry_run )) && return 0
  cat "$logs/gpu_test.log"
  listed=$(timeout 30 "$bin" --gtest_list_tests | awk '/^  /{n++} END{print n+0}')
  read -r ran passed skipped failed < <(gtest_counts "$logs/gpu_test.log")
  summary+=("gpu tests: $passed of $listed passed, $skipped skipped, $failed failed (exit $step_rc)")
  if (( step_rc != 0 || skipped != 0 || failed != 0 || passed != listed || ran != listed )); then
    fail "gpu tests: $passed of $listed passed, $skipped skipped, $failed failed, exit $step_rc"
  fi
}

run_table_bench() {
  step gpu_table_bench 90 "$pack/bin/gpu_table_bench"
  (( dry_run )) && return 0
  cat "$logs/gpu_table_bench.log"
  if (( step_rc == 0 )); then
    summary+=("GPU table, ours: $(sed -n 1p "$logs/gpu_table_bench.log")")
    summary+=("$(sed -n '2,5p' "$logs/gpu_table_bench.log" | sed 's/^/  /')")
  else
    summary+=("GPU table, ours: failed (exit $step_rc): $(tail -1 "$logs/gpu_table_bench.log")")
  fi
  summary+=("GPU table, HierarchicalKV's README (A100 80GB PCIe; uint64 keys, 8 floats each;"
            "  capacity 128M KV in 4 GB; 1,048,576 keys per call; load 0.50 / 0.75 / 1.00):"
            "  find 2.47 / 2.45 / 2.48, find_or_insert 1.48 / 1.34 / 0.61, find* (addresses"
            "  only) 3.73 / 3.37 / 1.87 G keys/s. Our fill 1.00 (64M keys in 128M slots) is"
            "  their load 0.50; our find is their find*, our find+gather their find.")
  if (( step_rc != 0 )); then fail "gpu_table_bench: exit $step_rc (see its log)"; fi
}

# The final line of a trainer log, and fields of it.
final_line() { awk '/"event":"final"/ { line = $0 } END { print line }' "$1"; }
field() { sed -n "s/.*\"$1\":\\([-0-9.eE+]*\\).*/\\1/p" <<<"$2"; }

run_trainers() {
  local rows="${GPU_CHECK_ROWS:-4000000}" batch="${GPU_CHECK_BATCH:-1024}" threads
  local tolerance="${GPU_CHECK_AUC_TOLERANCE:-0.005}"
  threads=$(nproc)
  local common=(--synthetic "$rows" --epochs 1 --seed 1 --batch-size "$batch"
                --embedding-dim 16 --progress-every 0)
  local trainer="$pack/bin/evoscale-trainer" device line
  declare -A rc=() final=()
  step trainer_cuda 120 "$trainer" "${common[@]}" --device cuda
  rc[cuda]=$step_rc
  step trainer_cpu 120 "$trainer" "${common[@]}" --device cpu --threads "$threads"
  rc[cpu]=$step_rc
  (( dry_run )) && return 0
  for device in cuda cpu; do
    line="$(final_line "$logs/trainer_$device.log")"
    if [ -z "$line" ] || (( rc[$device] != 0 )); then
      tail -5 "$logs/trainer_$device.log"
      fail "trainer --device $device: exit ${rc[$device]}$([ -n "$line" ] || echo ', no final line')"
    fi
    final[$device]="$line"
    say "final, --device $device: ${line:-none}"
  done
  local cuda_line="${final[cuda]}" cpu_line="${final[cpu]}"
  [ -n "$cuda_line" ] && [ -n "$cpu_line" ] || return 0
  local ce ge ca ga verdict ratio dauc off
  ce=$(field examples_per_s "$cpu_line"); ge=$(field examples_per_s "$cuda_line")
  ca=$(field auc "$cpu_line"); ga=$(field auc "$cuda_line")
  verdict=$(awk -v ce="$ce" -v ge="$ge" -v ca="$ca" -v ga="$ga" -v tol="$tolerance" 'BEGIN {
    d = ga - ca; printf "%.2f %+.6f %d", ge / ce, d, (d < -tol || d > tol) }')
  read -r ratio dauc off <<<"$verdict"
  summary+=("trainer, --synthetic $rows, batch $batch, one epoch, seed 1:"
            "  cuda: $ge examples/s, AUC $ga"
            "  cpu ($threads threads): $ce examples/s, AUC $ca"
            "  cuda / cpu examples/s: ${ratio}x; AUC cuda - cpu: $dauc")
  if (( off )); then fail "trainer: AUC differs by $dauc (tolerance $tolerance)"; fi
}

# The machine's libnccl.so.2 (the loader's, the toolkit's, or a PyTorch wheel's), or nothing.
find_nccl() {
  local path
  path="$(ldconfig -p 2>/dev/null | awk '$1 == "libnccl.so.2" {print $NF; exit}')"
  if [ -z "$path" ]; then
    path="$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets /usr/lib \
      /usr/local/lib /opt -name 'libnccl.so.2' -print -quit 2>/dev/null || true)"
  fi
  if [ -z "$path" ] && command -v python3 >/dev/null; then
    path="$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null || true)"
    [ -f "$path" ] || path=""
  fi
  printf '%s\n' "$path"
}

# A job of two GPU processes over NCCL (--device cuda, ranks from the environment: the machine
# has no Open MPI) against one process, same seed and global batch; then one of its ranks killed
# with SIGKILL mid-training. One GPU here: NCCL refuses two ranks on one device unless each
# believes it is on a host of its own (NCCL_HOSTID), over loopback sockets (no SHM, no P2P), so
# this checks the exchange's correctness, not its speed.
run_nccl_job() {
  local rows="${GPU_CHECK_NCCL_ROWS:-200000}" batch="${GPU_CHECK_BATCH:-1024}"
  local tolerance="${GPU_CHECK_NCCL_AUC_TOLERANCE:-0.003}" nccl
  local trainer="$pack/bin/evoscale-trainer"
  local common=(--synthetic "$rows" --epochs 1 --seed 1 --batch-size "$batch"
                --embedding-dim 16 --progress-every 0 --device cuda)
  nccl="$(find_nccl)"
  if [ -z "$nccl" ] && (( ! dry_run )); then
    fail "no libnccl.so.2 on this machine: the job of two GPU processes cannot run"
    return 0
  fi
  say "NCCL: ${nccl:-(found at run time)}"
  local rendezvous
  rendezvous="$(mktemp -u /tmp/gpu_check_rendezvous.XXXXXX)"
  # ranks ARGS...: starts two ranks in the background (pids in rank_pids), logs nccl_rank{0,1},
  # each under a limit of 90 s or what is left of the budget; fails (returns 1) with none left.
  ranks() {
    local r limit=$(( deadline - $(date +%s) ))
    (( limit <= 90 )) || limit=90
    if (( limit < 5 )); then fail "NCCL job: no time left in the ${budget} s budget"; return 1; fi
    rank_pids=()
    rm -f "$rendezvous"
    for r in 0 1; do
      EVOSCALE_WORLD_SIZE=2 EVOSCALE_RANK=$r EVOSCALE_LOCAL_RANK=0 \
        EVOSCALE_RENDEZVOUS_FILE="$rendezvous" EVOSCALE_NCCL_LIBRARY="$nccl" \
        NCCL_HOSTID="evoscale-gpu-check-rank-$r" NCCL_SHM_DISABLE=1 NCCL_P2P_DISABLE=1 \
        NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=WARN \
        timeout --kill-after=5 "$limit" "$trainer" "$@" >"$logs/nccl_rank$r.log" 2>&1 &
      rank_pids+=($!)
    done
  }
  step nccl_one 90 "$trainer" "${common[@]}"
  local one_rc=$step_rc
  say "nccl_two (limit 90 s): two ranks of: $(printf '%q ' "$trainer" "${common[@]}")"
  (( dry_run )) && { say "nccl_kill: the same two ranks with --progress-every 5, rank 1 killed after rank 0's first progress line"; return 0; }
  local t0 rc0=0 rc1=0
  t0=$(date +%s)
  ranks "${common[@]}" || return 0
  wait "${rank_pids[0]}" || rc0=$?
  wait "${rank_pids[1]}" || rc1=$?
  say "nccl_two: exit $rc0 / $rc1 after $(( $(date +%s) - t0 )) s"
  local one_line two_line
  one_line="$(final_line "$logs/nccl_one.log")"
  two_line="$(final_line "$logs/nccl_rank0.log")"
  if (( one_rc != 0 )) || [ -z "$one_line" ]; then
    tail -5 "$logs/nccl_one.log"; fail "one GPU process: exit $one_rc"
  fi
  if (( rc0 != 0 || rc1 != 0 )) || [ -z "$two_line" ]; then
    tail -5 "$logs/nccl_rank0.log" "$logs/nccl_rank1.log"
    fail "two GPU processes over NCCL: exit $rc0 / $rc1$([ -n "$two_line" ] || echo ', no final line')"
  fi
  if [ -n "$one_line" ] && [ -n "$two_line" ]; then
    local a1 a2 e1 e2 bytes verdict dauc off
    a1=$(field auc "$one_line"); a2=$(field auc "$two_line")
    e1=$(field examples_per_s "$one_line"); e2=$(field examples_per_s "$two_line")
    bytes=$(field bytes_exchanged_per_example "$two_line")
    verdict=$(awk -v a="$a1" -v b="$a2" -v tol="$tolerance" 'BEGIN {
      d = b - a; printf "%+.6f %d", d, (d < -tol || d > tol) }')
    read -r dauc off <<<"$verdict"
    summary+=("NCCL job, --synthetic $rows, batch $batch, one epoch, seed 1, one GPU:"
              "  one process: AUC $a1, $e1 examples/s"
              "  two ranks (loopback sockets): AUC $a2 ($dauc), $e2 examples/s,"
              "  $bytes bytes exchanged per example")
    if (( off )); then fail "NCCL job: AUC differs by $dauc (tolerance $tolerance)"; fi
  fi
  # A rank killed mid-training: the other must end non-zero, with an error line, within 10 s.
  local killed_at ended
  ranks --synthetic 4000000 --epochs 1 --seed 1 --batch-size "$batch" --embedding-dim 16 \
    --progress-every 5 --device cuda || return 0
  for _ in $(seq 600); do
    grep -q '"event":"progress"' "$logs/nccl_rank0.log" 2>/dev/null && break
    kill -0 "${rank_pids[0]}" 2>/dev/null || break
    sleep 0.1
  done
  kill -9 "${rank_pids[1]}" 2>/dev/null || true
  killed_at=$(date +%s)
  rc0=0
  wait "${rank_pids[0]}" || rc0=$?
  wait "${rank_pids[1]}" 2>/dev/null || true
  ended=$(( $(date +%s) - killed_at ))
  local error_line
  error_line="$(grep '"event":"error"' "$logs/nccl_rank0.log" | tail -1)"
  summary+=("NCCL job, rank 1 killed: rank 0 exit $rc0 after $ended s: ${error_line:-no error line}")
  if (( rc0 == 0 || rc0 == 124 || rc0 == 137 || ended > 10 )) || [ -z "$error_line" ]; then
    fail "NCCL job with a killed rank: rank 0 exit $rc0 after $ended s (want non-zero, an error line, <= 10 s)"
  fi
  rm -f "$rendezvous"
}

run() {
  pack="$(cd "${1:-$pack_name}" && pwd)" || die "no pack folder ${1:-$pack_name}: run pack first"
  shift || true
  dry_run=0
  if [ "${1:-}" = "--dry-run" ]; then dry_run=1; fi
  budget="${GPU_CHECK_BUDGET_S:-300}"
  deadline=$(( $(date +%s) + budget ))
  summary=()
  local b cublas_dir missing
  for b in "${binaries[@]}"; do
    [ -x "$pack/bin/$b" ] || die "$pack/bin/$b missing: run bench/trainer/gpu_check.sh pack"
  done
  cublas_dir="$(find_cublas_dir)"
  export LD_LIBRARY_PATH="$pack/lib${cublas_dir:+:$cublas_dir}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  say "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  [ -n "$cublas_dir" ] || fail "no libcublas.so.13 on this machine: the MLP on the GPU cannot run"
  missing="$(for b in "${binaries[@]}"; do
    ldd "$pack/bin/$b" | awk -v b="$b" '/not found/ { print b ": " $1 }'
  done)"
  [ -z "$missing" ] || die "libraries missing: $missing"
  if (( dry_run )); then
    logs="(none: dry run)"
  elif [ -n "${OUT:-}" ]; then
    logs="$OUT"
  else
    logs="$(mktemp -d /tmp/gpu_check.XXXXXX)"
  fi

  say "budget ${budget} s; $(nproc) cores; logs in $logs"
  if (( dry_run )); then
    say "nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader"
  elif ! gpu="$(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm \
      --format=csv,noheader)"; then
    die "nvidia-smi finds no GPU: nothing to check here"
  else
    say "GPU: $gpu"
    summary+=("GPU: $gpu; $(nproc) cores; pack $(sed -n 's/^source: //p' "$pack/MANIFEST")")
  fi
  run_gpu_tests
  run_table_bench
  run_trainers
  run_nccl_job
  if (( dry_run )); then say "dry run: nothing was run"; return 0; fi

  if (( ${#failures[@]} )); then
    summary+=("FAILED:" "${failures[@]/#/  }")
  else
    summary+=("all passed")
  fi
  local text
  text="$(printf '%s\n' "${summary[@]}")"
  printf '\n%s\n' "$text"
  if [ -n "${OUT:-}" ]; then printf '%s\n' "$text" >"$OUT/gpu_check.txt"; fi
  (( ${#failures[@]} == 0 ))
}

case "${1:-}" in
  pack) shift; pack "$@" ;;
  run) shift; mode=run; run "$@" ;;
  *) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
esac
