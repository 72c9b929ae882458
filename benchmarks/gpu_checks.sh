#!/usr/bin/env bash
# The device checks in one call, for a session lent a GPU machine with the workplace's CUDA
# image (jax, optax, chex, pytest and pytest-xdist installed, no network): from the repository
# root there, `bash benchmarks/gpu_checks.sh` (at most 7 minutes and 40 s; give the call
# timeout_s=480 and keep the device time for a rerun of one part: `bash
# benchmarks/gpu_checks.sh scale` runs only that part; parts: tests rest step_cost scale
# scale64 subproblem_real). JAX's default TF32 float32 matmuls stay
# on: the library must not need the global setting. Writes to $OUT (or ./gpu_out), at most 7
# files so that all come back:
#   log.txt           the JAX version and devices, then the test runs on the GPU (pytest -v,
#                     8 workers): first the geometry, subproblem, precision and optimizer files,
#                     then (part `rest`, not run by default) the rest of the suite;
#   step_cost.{md,json}, subproblem_real.{md,json}, scale_gpu.{md,json}   the benchmarks
#                     (scale64: scale_gpu64.{md,json}, the float64 rows). On an H200 each
#                     (size, dtype) of scale.py compiles 6 programs of 5-17 s each: the three
#                     sizes of one dtype need about 5 minutes (SCALE_TIMEOUT=300).
set -uo pipefail
mkdir -p "${OUT:-gpu_out}"
out="$(cd "${OUT:-gpu_out}" && pwd)"
parts="${*:-tests step_cost scale subproblem_real}"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
log="$out/log.txt"
python3 -c "import jax; print(jax.__version__, jax.devices())" >> "$log" 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >> "$log" 2>&1
first=(tests/test_precision.py tests/test_stiefel.py tests/test_subproblem.py
       tests/test_subproblem_real.py tests/test_secant.py tests/test_optimizers.py
       tests/test_robustness.py tests/test_transforms.py)
stamp() { echo "== $1 $(date +%T)" | tee -a "$log"; }
for part in $parts; do
  stamp "$part"
  case "$part" in
    tests) timeout 120 python3 -m pytest -v -n 8 -p no:cacheprovider "${first[@]}" >> "$log" 2>&1
           echo "rc=$?" >> "$log"; tail -2 "$log" ;;
    rest) args=(); for f in "${first[@]}"; do args+=("--ignore=$f"); done
          timeout 90 python3 -m pytest -v -n 12 -p no:cacheprovider tests rproxjax \
              "${args[@]}" >> "$log" 2>&1
          echo "rc=$?" >> "$log"; tail -2 "$log" ;;
    step_cost) (cd benchmarks && timeout 170 python3 step_cost.py --repeats 3 --sweep-repeats 2 \
                && cp results/step_cost.md results/step_cost.json "$out/") >> "$log" 2>&1 ;;
    scale|scale64) dt=float32; [ "$part" = scale64 ] && dt=float64
           (cd benchmarks && timeout "${SCALE_TIMEOUT:-150}" python3 scale.py --dtypes $dt \
                --steps 30 --repeats 3 --sweep-repeats 2 --name "${part/scale/scale_gpu}"; \
            cp results/"${part/scale/scale_gpu}".md results/"${part/scale/scale_gpu}".json \
                "$out/") >> "$log" 2>&1 ;;
    subproblem_real) (cd benchmarks && timeout 70 python3 subproblem_real.py --repeats 2 \
                      && cp results/subproblem_real.md results/subproblem_real.json "$out/") \
                     >> "$log" 2>&1 ;;
  esac
done
stamp done
ls -la "$out"
