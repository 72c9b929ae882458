"""step_cost.py with other subproblem settings, for A/B runs of a kernel rule.

``--ssn FIELD=VALUE ...`` builds the proximal optimizers' settings
``rproxjax.SSN.stochastic(FIELD=VALUE, ...)`` (``--preset exact``: ``rproxjax.SSN(...)``),
VALUE a Python literal (a bare word is taken as a string); the arguments after ``--`` go to
``step_cost.py``, whose comparison rows then change one field of these settings. Run the arms
in separate processes, alternating, on a quiet machine::

    python benchmarks/step_cost_ab.py --ssn jacobi_first=False -- --mus 0.2 --no-sweep --no-save
    python benchmarks/step_cost_ab.py --ssn jacobi_first=True -- --mus 0.2 --no-sweep --no-save

(``results/jacobi_ab.md`` collects four such runs.)
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import sys

import rproxjax

try:  # run as a script: benchmarks/ is on sys.path
    import step_cost
except ImportError:  # run as `python -m benchmarks.step_cost_ab`
    from benchmarks import step_cost

PRESETS = {"stochastic": rproxjax.SSN.stochastic, "exact": rproxjax.SSN}


def _value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text  # a bare word: a string field such as warm_start=lam_h


def settings(pairs, preset="stochastic"):
    """``PRESETS[preset](**fields)`` from ``FIELD=VALUE`` strings."""
    names = {f.name for f in dataclasses.fields(rproxjax.SSN)}
    fields = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in names:
            raise SystemExit(f"--ssn takes FIELD=VALUE with FIELD one of {sorted(names)}; "
                             f"got {pair!r}")
        fields[name] = _value(value)
    try:
        return PRESETS[preset](**fields)
    except (TypeError, ValueError) as err:
        raise SystemExit(f"--ssn: {err}") from err


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n", 1)[0],
        epilog="Arguments after -- go to step_cost.py (see its --help).")
    parser.add_argument("--ssn", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="fields of rproxjax.SSN, e.g. jacobi_first=False")
    parser.add_argument("--preset", choices=sorted(PRESETS), default="stochastic",
                        help="SSN.stochastic (the optimizers' default) or SSN (exact solves)")
    args = parser.parse_args(argv[:split])
    ssn = settings(args.ssn, args.preset)
    print(f"subproblem settings: {ssn}", flush=True)
    step_cost.main(argv[split + 1:], ssn=ssn)


if __name__ == "__main__":
    main()
