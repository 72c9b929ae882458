#!/usr/bin/env bash
# The device checks in one call, for a session lent a GPU machine with the workplace's CUDA
# image (jax, optax, chex, pytest and pytest-xdist installed, no network): from the repository
# root there, `bash benchmarks/gpu_checks.sh` (at most 9.5 minutes: give the call
# timeout_s=575; `bash benchmarks/gpu_checks.sh scale` runs only that part; parts, in their
# default order: step_cost subproblem_real scale tests; step_cost first, as the kernel's
# per-step rows are what a kernel change moves; `profile`, not in the default order, runs
# benchmarks/gpu_profile.py: the device's kernels per step and the retraction's and the
# Newton system's forms alone, 93 s on an H200 before its whole-run rows; `profile_flags` its steps in float64
# under two settings of XLA's command buffers, gpu_profile_cmdbuf_{loops,none}.{md,json}). The timed parts run first, on a quiet
# machine, and each benchmark compiles its programs concurrently before timing them (16 host
# cores), then the test suite runs on 14 workers for what time is left. JAX's default TF32
# float32 matmuls stay on: the library must not need the global setting. Writes to $OUT
# (or ./gpu_out) at most 7 files for the default parts, so that all come back (with `profile`
# two more: the device returns 8 files, so leave scale, step_cost or subproblem_real out then):
#   log.txt          the JAX version and devices, every part's output, the tests' -v lines;
#   scale_gpu.{md,json}         benchmarks/scale.py: the three sizes in float32 and float64,
#                    8 and 64 lanes, R-ProxSGD also with each Newton linear solver forced;
#   step_cost_gpu.{md,json}     benchmarks/step_cost.py (MNIST, mu 0.05-0.8, both dtypes);
#   subproblem_real_gpu.{md,json}  benchmarks/subproblem_real.py;
#   gpu_profile.{md,json}       benchmarks/gpu_profile.py (part `profile` only);
# SCALE_SIZES (indices into scale.py's SIZES, in the order run), SCALE_TIMEOUT, TESTS_TIMEOUT
# and TEST_PATHS (pytest's paths, in the order sent to the workers) choose what a short lease
# covers first: all parts do not fit one 15-minute lease. On an H200, step_cost took about
# 150 s (170 s allowed), subproblem_real --repeats 1 95-175 s (120 s allowed: a run cut
# short keeps its progress lines in the log), scale sizes 0 1 about 150 s; the whole test
# suite needs more than the time left, so name the files to run in TEST_PATHS.
# The tests' counts (PASSED, FAILED, ERROR, SKIPPED lines of the -v output) end the log: a
# pytest-xdist session stopped by the time limit writes no report of its own.
set -uo pipefail
mkdir -p "${OUT:-gpu_out}"
out="$(cd "${OUT:-gpu_out}" && pwd)"
parts="${*:-step_cost subproblem_real scale tests}"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
log="$out/log.txt"
python3 -c "import jax; print(jax.__version__, jax.devices())" >> "$log" 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$log" 2>&1
stamp() { echo "== $1 $(date +%T)" | tee -a "$log"; }
# Results written by this run only (newer than the marker): the committed results of other
# machines must not come back as this one's.
marker="$out/.start"; touch "$marker"
save() {  # save NAME.EXT TARGET.EXT ...
  while [ $# -ge 2 ]; do
    [ "benchmarks/results/$1" -nt "$marker" ] && cp "benchmarks/results/$1" "$out/$2"
    shift 2
  done
}
for part in $parts; do
  stamp "$part"
  case "$part" in
    scale) (cd benchmarks && timeout "${SCALE_TIMEOUT:-200}" python3 scale.py --steps 30 \
                --sizes ${SCALE_SIZES:-0 1 2} --repeats 3 --sweep-repeats 2 \
                --linear-solvers dense cg --name scale_gpu) \
               >> "$log" 2>&1
           save scale_gpu.md scale_gpu.md scale_gpu.json scale_gpu.json ;;
    profile) (cd benchmarks && timeout "${PROFILE_TIMEOUT:-300}" python3 gpu_profile.py \
                  --repeats 5) >> "$log" 2>&1
             save gpu_profile.md gpu_profile.md gpu_profile.json gpu_profile.json ;;
    profile_flags)  # the steps under XLA's command buffers: loops and branches in them, or none
      cmd="FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL"
      for variant in "loops:--xla_gpu_enable_command_buffer=$cmd" \
                     "none:--xla_gpu_enable_command_buffer="; do
        name="gpu_profile_cmdbuf_${variant%%:*}"
        (cd benchmarks && XLA_FLAGS="${variant#*:}" timeout 150 python3 gpu_profile.py \
             --no-pieces --dtypes float64 --repeats 5 --name "$name") >> "$log" 2>&1
        save "$name.md" "$name.md" "$name.json" "$name.json"
      done ;;
    step_cost) (cd benchmarks && timeout 170 python3 step_cost.py --repeats 3 \
                    --sweep-repeats 2) >> "$log" 2>&1
               save step_cost.md step_cost_gpu.md step_cost.json step_cost_gpu.json ;;
    subproblem_real) (cd benchmarks && timeout 120 python3 subproblem_real.py --repeats 1) \
                         >> "$log" 2>&1
                     save subproblem_real.md subproblem_real_gpu.md \
                          subproblem_real.json subproblem_real_gpu.json ;;
    tests) timeout -s INT -k 15 "${TESTS_TIMEOUT:-90}" python3 -m pytest -v -n 14 \
               -p no:cacheprovider ${TEST_PATHS:-tests rproxjax} >> "$log" 2>&1
           echo "rc=$?" >> "$log"
           for w in PASSED FAILED ERROR SKIPPED; do  # xdist's -v lines: one per test done
             echo "$w $(grep -cE "(\] | )$w (tests|rproxjax)/" "$log")"; done | tee -a "$log" ;;
  esac
done
stamp done
rm -f "$marker"
ls -la "$out"
