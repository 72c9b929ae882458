"""Shared by the experiment tests: a tiny run and the checks every results file passes."""

import json

import pytest

import experiments


def run_tiny(name, out_dir):
    if experiments.CONFIGS[name].kind == "peers":
        pytest.importorskip("spams")
        pytest.importorskip("sklearn")
    return experiments.run(name, size="tiny", out_dir=out_dir, progress=False)


def check_file(result, out_dir):
    on_disk = json.loads((out_dir / f"{result['name']}.json").read_text())
    assert on_disk["complete"] and on_disk["summary"] == result["summary"]
    for field in ("date", "jax", "device", "cpu_count", "rproxjax"):
        assert on_disk["machine"][field]
    claims = on_disk["summary"]["claims"]
    assert claims and all(isinstance(c["pass"], bool) and c["numbers"] for c in claims)
    paths = experiments.plot(on_disk, out_dir)
    assert paths and all(p.stat().st_size > 10_000 for p in paths)
