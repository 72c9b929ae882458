#!/usr/bin/env bash
# The subproblem kernel's device checks in one call, for a session lent a GPU machine with the
# workplace's CUDA image (jax, optax, chex and pytest installed, no network): from the
# repository root there, `bash benchmarks/gpu_checks.sh` (about 6-8 minutes; give the call
# timeout_s=540 and keep the device time for one rerun). Writes to $OUT (or ./gpu_out):
#   devices.txt       the JAX version and devices;
#   tests.log         the geometry, subproblem, precision and optimizer tests on the GPU
#                     (JAX's default TF32 float32 matmuls stay on: the library must not need
#                     the global setting);
#   step_cost.md/json and subproblem_real.md/json   the benchmarks, on the GPU.
set -uo pipefail
out="${OUT:-gpu_out}"
mkdir -p "$out"
export PYTHONPATH="$PWD" PYTHONUNBUFFERED=1
python3 -c "import jax; print(jax.__version__, jax.devices())" 2>&1 | tee "$out/devices.txt"
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/test_stiefel.py \
    tests/test_subproblem.py tests/test_subproblem_real.py tests/test_precision.py \
    tests/test_secant.py tests/test_optimizers.py tests/test_robustness.py > "$out/tests.log" 2>&1
tail -3 "$out/tests.log"
(cd benchmarks && timeout 120 python3 subproblem_real.py --repeats 3 \
    && cp results/subproblem_real.md results/subproblem_real.json "$out/") 2>&1 | tail -3
(cd benchmarks && timeout 200 python3 step_cost.py --repeats 5 --sweep-repeats 2 \
    && cp results/step_cost.md results/step_cost.json "$out/") 2>&1 | tail -3
ls -la "$out"
