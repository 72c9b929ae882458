"""``python -m experiments NAME [NAME ...] [--size tiny] [--out results]``, from the
repository root; ``--demo`` records the demonstration (``<out>/demo.json``), ``--report``
writes ``<out>/README.md`` from the saved results. The command keeps its compiled programs
in JAX's persistent cache (:func:`rproxjax.enable_compilation_cache`; ``--no-cache``: not)."""

from __future__ import annotations

import argparse
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m experiments",
        description="Runs the paper's experiments from named configurations; results resume "
                    "from <out>/<name>.json.")
    parser.add_argument("names", nargs="*", help="configurations to run, or 'all'")
    parser.add_argument("--list", action="store_true", help="list the configurations")
    parser.add_argument("--size", default="paper", choices=("paper", "tiny"))
    parser.add_argument("--out", default=None,
                        help="folder for JSON files and figures (default: results, or "
                             "results/tiny with --size tiny)")
    parser.add_argument("--force", action="store_true", help="recompute saved results")
    parser.add_argument("--rerun", metavar="PATTERN", action="append", default=[],
                        help="drop the saved units whose key matches PATTERN (fnmatch, e.g. "
                             "'run/*/mu=0.2/*'; repeatable) before resuming, so that they run "
                             "again at the present commit and on this machine")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.add_argument("--demo", action="store_true",
                        help="run the demonstration (python -m rproxjax) at its defaults, in "
                             "float32 as that command runs it, and record it in "
                             "<out>/demo.json (the README's table); not with NAMEs")
    parser.add_argument("--report", action="store_true",
                        help="(re)write <out>/README.md and the figures from the saved results")
    parser.add_argument("--readme", metavar="PATH",
                        help="with --report: also rewrite the generated block of this README "
                             "(the demonstration's table and the claim counts)")
    return parser


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = "results" if args.size == "paper" else "results/tiny"
    if args.readme and not args.report:
        parser.error("--readme goes with --report")
    if args.demo and args.names:
        parser.error("--demo runs without NAMEs: the experiments run in float64, the "
                     "demonstration as `python -m rproxjax` runs it; run them in two commands")
    if args.report and not args.names and not args.demo and not os.path.isdir(args.out):
        parser.error(f"--report: no results folder {args.out!r} (run an experiment first, or "
                     "pass --out)")
    if args.demo:
        from experiments._demo import record

        record(args.out)
    if args.report and not args.names:
        _report(args, figures=not args.no_plot)
        return 0
    if args.demo:
        return 0

    import jax

    jax.config.update("jax_enable_x64", True)  # the paper's experiments run in float64

    import experiments

    if args.list or not args.names:
        for name, cfg in experiments.CONFIGS.items():
            print(f"{name:18s} {cfg}")
        return 0
    names = list(experiments.CONFIGS) if args.names == ["all"] else args.names
    for name in names:
        try:
            experiments.get_config(name, args.size)  # fail early on a bad name
        except (KeyError, ValueError) as err:  # a usage error, not a traceback
            parser.error(str(err))
    if args.rerun and (args.force or not names):
        parser.error("--rerun goes with NAMEs and without --force")
    for name in names:
        if args.rerun:
            dropped = experiments.drop_units(args.out, name, args.rerun)
            print(f"{name}: dropped {len(dropped)} unit(s) to rerun")
        result = experiments.run(name, size=args.size, out_dir=args.out, force=args.force,
                                 progress=not args.quiet)
        print(name)
        print("\n".join(experiments.claim_lines(result, name)))
        if not args.no_plot:
            for path in experiments.plot(result, args.out):
                print(f"  saved {path}")
    if args.report:
        _report(args, figures=False)
    return 0


def _report(args, figures):
    from experiments._report import update_readme, write_report

    print(f"wrote {write_report(args.out, figures=figures)}")
    if args.readme:
        print(f"wrote {update_readme(args.readme, args.out)}")


if __name__ == "__main__":  # the command's own process: compiled programs kept for the next
    if "--no-cache" not in sys.argv[1:]:
        import rproxjax

        rproxjax.enable_compilation_cache()
    sys.exit(main([a for a in sys.argv[1:] if a != "--no-cache"]))
