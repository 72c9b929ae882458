"""Claims checked on the data: the paper's (quoted) apart from the project's own checks.

Every claim is a dictionary ``{"claim", "kind", "quote", "per_seed", "seeds_passed",
"seeds", "pass", "numbers"}``: ``kind`` is ``"paper"`` (a claim the paper makes; ``quote``
holds its words) or ``"check"`` (a check of this project, which the paper does not claim);
``per_seed`` lists the verdict of each reported seed (one entry for an unseeded check);
``pass`` is true when every seed passes. Reports show the count of seeds that pass.
"""

from __future__ import annotations

PAPER = "paper"
CHECK = "check"


def claim(text: str, per_seed, numbers: str, *, quote: str | None = None,
          kind: str = PAPER) -> dict:
    """A claim with its verdict on each seed (``per_seed``: bools, or one bool)."""
    if kind not in (PAPER, CHECK):
        raise ValueError(f"kind must be {PAPER!r} or {CHECK!r}, got {kind!r}.")
    if kind == PAPER and not quote:
        raise ValueError("a claim of the paper needs the paper's words (quote=).")
    per_seed = [bool(p) for p in (per_seed if isinstance(per_seed, (list, tuple))
                                  else [per_seed])]
    if not per_seed:
        raise ValueError("a claim needs at least one verdict.")
    return {"claim": text, "kind": kind, "quote": quote, "per_seed": per_seed,
            "seeds_passed": sum(per_seed), "seeds": len(per_seed), "pass": all(per_seed),
            "numbers": numbers}


def check(text: str, per_seed, numbers: str) -> dict:
    """A check of this project (not a claim of the paper)."""
    return claim(text, per_seed, numbers, kind=CHECK)


def verdict(c: dict) -> str:
    """"pass" (every seed), "FAIL" (none) or "mixed k/S"."""
    if "seeds" not in c:  # results files written before claims were counted over seeds
        return "pass" if c["pass"] else "FAIL"
    k, s = c["seeds_passed"], c["seeds"]
    if k == s:
        return "pass" if s == 1 else f"pass {k}/{s}"
    return "FAIL" if k == 0 else f"mixed {k}/{s}"


def render(claims: list[dict]) -> list[str]:
    """Markdown: (a) the paper's claims, quoted, then (b) the project's checks."""
    lines = []
    paper = [c for c in claims if c.get("kind", PAPER) == PAPER]
    checks = [c for c in claims if c.get("kind") == CHECK]
    unsplit = any("kind" not in c for c in claims)
    if paper:
        title = ("Claims checked (results made before the paper's claims were separated from "
                 "the project's checks)" if unsplit else "(a) The paper's claims")
        lines += [f"{title}: **{_passed(paper)}**.", "",
                  "| verdict | claim | the paper's words | numbers |", "|---|---|---|---|"]
        for c in paper:
            quote = f"\"{_cell(c['quote'])}\"" if c.get("quote") else ""
            lines.append(f"| {_bold(c)} | {_cell(c['claim'])} | {quote} | "
                         f"{_cell(c['numbers'])} |")
        lines.append("")
    if checks:
        lines += [f"(b) The project's own checks (not claims of the paper): "
                  f"**{_passed(checks)}**.", "", "| verdict | check | numbers |", "|---|---|---|"]
        for c in checks:
            lines.append(f"| {_bold(c)} | {_cell(c['claim'])} | {_cell(c['numbers'])} |")
        lines.append("")
    return lines


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a "|" (as in |Omega|) would split the cell."""
    return str(text).replace("\\|", "|").replace("|", "\\|")


def _passed(claims) -> str:
    return f"{sum(c['pass'] for c in claims)}/{len(claims)} pass on every seed"


def _bold(c) -> str:
    v = verdict(c)
    return v if v.startswith("pass") else f"**{v}**"
