"""Data-parallel R-ProxSGD over several processes (hosts) with ``jax.distributed``.

Each process holds only its own rows of the data set; together they form one global array
split over every device of every process, and ``rproxjax.fit(..., sharding=...)`` runs on it:
each device draws its share of every minibatch from its rows, the gradients are
all-reduced, and every process ends with the same (replicated) point.

On a cluster, start one copy per host with that host's index (or let
``jax.distributed.initialize()`` read them from SLURM / Open MPI / Cloud TPU)::

    python examples/multihost.py --process-id 0 --num-processes 2 --coordinator host0:12355
    python examples/multihost.py --process-id 1 --num-processes 2 --coordinator host0:12355

On one machine, ``python examples/multihost.py --local 2`` starts the 2 processes itself
(CPU, one device each; JAX's CPU backend runs the collectives with gloo). Every process
prints F and a checksum of its final point; they agree with each other and with one process
of as many devices (``XLA_FLAGS=--xla_force_host_platform_device_count=2 python
examples/multihost.py``), which draws the same per-shard samples.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

N, D, R, B = 512, 32, 4, 64


def global_problem():
    """The whole data set and X0, generated identically in every process (a stand-in for
    files each process would read its rows from)."""
    import jax
    import numpy as np

    import rproxjax

    rng = np.random.default_rng(0)
    data = rng.standard_normal((N, D)).astype(np.float32)
    x0 = rproxjax.stiefel.random_point(jax.random.key(1), D, R)
    return data, x0


def run(process_id: int, num_processes: int, coordinator: str) -> None:
    import jax

    if num_processes > 1:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=coordinator,
                                   num_processes=num_processes, process_id=process_id)
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    import rproxjax
    from rproxjax.problems import spca_loss

    mesh = jax.make_mesh((jax.device_count(),), ("data",))
    data, x0 = global_problem()
    rows = N // jax.process_count()
    local = data[jax.process_index() * rows:(jax.process_index() + 1) * rows]
    sharding = NamedSharding(mesh, P("data"))  # the samples split over the "data" axis
    global_data = jax.make_array_from_process_local_data(sharding, local)
    opt = rproxjax.r_prox_sgd(0.5, 0.05, rproxjax.l1(0.1))
    res = rproxjax.fit(opt, spca_loss, x0, global_data, key=jax.random.key(2), batch_size=B,
                       num_epochs=2, sharding=sharding)
    x = np.asarray(res.params)  # replicated: every process holds the whole point
    print(f"process {jax.process_index()}/{jax.process_count()} devices "
          f"{jax.device_count()}: F {float(res.epoch_loss[-1]):.6f} checksum "
          f"{float(np.sum(x * np.arange(x.size).reshape(x.shape))):.6f}", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--process-id", type=int, default=0)
    parser.add_argument("--num-processes", type=int, default=1)
    parser.add_argument("--coordinator", default="localhost:12355")
    parser.add_argument("--local", type=int, default=0,
                        help="start this many processes on this machine and wait for them")
    args = parser.parse_args(argv)
    if not args.local:
        run(args.process_id, args.num_processes, args.coordinator)
        return
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    procs = [subprocess.Popen([sys.executable, __file__, "--process-id", str(i),
                               "--num-processes", str(args.local),
                               "--coordinator", args.coordinator], env=env)
             for i in range(args.local)]
    codes = [p.wait(timeout=600) for p in procs]
    if any(codes):
        sys.exit(f"a process failed: exit codes {codes}")


if __name__ == "__main__":
    main()
