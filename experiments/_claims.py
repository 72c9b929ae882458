"""Claims checked on the data, and how they are counted: v3's accounting.

The paper's claims are now tested one by one with the paired rule of
:mod:`experiments._paired` (:mod:`experiments._paper_claims`); this module's rule (a win by
more than the unpaired seed spread) still counts the project's own checks, and gives the
v3 verdict the report shows beside each paper claim's present one.

Every claim is a dictionary ``{"claim", "kind", "quote", "key", "per_seed", "wins", "ties",
"losses", "seeds", "pass", "foregone", "numbers"}``:

* ``kind``: ``"paper"``, a claim the paper makes, checked at the paper's own settings
  (``quote`` holds its words); ``"panel"``, the same comparison at a setting of this
  project's (mu as a fraction of mu_deg), which the paper never ran: reported apart and
  never counted as the paper's; ``"check"``, a check of this project's own.
* ``per_seed``: the outcome on each reported seed, ``"win"``, ``"tie"`` or ``"loss"``. A
  comparison is a win only by a margin larger than the seed-to-seed spread
  (:func:`outcome`), a loss by the same margin the other way, otherwise a tie.
* ``pass``: a win on every seed. A claim with wins on fewer than all seeds is "mixed" and
  never counted as a pass; one that ties everywhere is a "tie".
* ``foregone``: None, or why the comparison says nothing (for instance ManPG at equal IFOs
  when it takes a handful of full-gradient steps in the budget): counted apart.
* ``key``: what is compared (methods, axis, panel); a tally refuses two claims with the
  same key, so that no comparison is counted twice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PAPER = "paper"
PANEL = "panel"
CHECK = "check"
KINDS = (PAPER, PANEL, CHECK)
WIN, TIE, LOSS = "win", "tie", "loss"


def outcome(diff, margin) -> str:
    """One seed's outcome of "a is below b" from d_k = b_k - a_k at the compared points
    (one point for an end-of-budget comparison, every recorded point after the first pass
    for "consistently") and the margins m_k >= 0 there: a win where every d_k > m_k, a
    loss where some d_k < -m_k, a tie otherwise."""
    d, m = np.atleast_1d(np.asarray(diff, float)), np.atleast_1d(np.asarray(margin, float))
    if d.size == 0 or not np.all(np.isfinite(d)):
        return LOSS
    if np.any(d < -m):
        return LOSS
    return WIN if np.all(d > m) else TIE


def spread(values) -> np.ndarray:
    """The seed-to-seed spread of ``values`` (seeds on axis 0): max - min over seeds."""
    v = np.asarray(values, float)
    return v.max(axis=0) - v.min(axis=0)


def lower(a, b) -> list[str]:
    """Outcomes of "a is below b" per seed, for values of shape (seeds,) or (seeds,
    points): the margin at each point is the larger of the two methods' seed spreads."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    margin = np.maximum(spread(a), spread(b))
    return [outcome(bs - as_, margin) for as_, bs in zip(a, b, strict=True)]


def claim(text: str, per_seed, numbers: str, *, quote: str | None = None,
          kind: str = PAPER, key: str | None = None, foregone: str | None = None) -> dict:
    """A claim with its outcome on each seed (``per_seed``: "win"/"tie"/"loss", or bools,
    True a win and False a loss)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}.")
    if kind in (PAPER, PANEL) and not quote:
        raise ValueError("a comparison the paper makes needs the paper's words (quote=).")
    per_seed = list(per_seed) if isinstance(per_seed, list | tuple) else [per_seed]
    if not per_seed:
        raise ValueError("a claim needs at least one verdict.")
    per_seed = [(WIN if p else LOSS) if isinstance(p, bool | np.bool_) else p
                for p in per_seed]
    if any(p not in (WIN, TIE, LOSS) for p in per_seed):
        raise ValueError(f"outcomes must be {WIN!r}, {TIE!r} or {LOSS!r}, got {per_seed}.")
    wins, ties = per_seed.count(WIN), per_seed.count(TIE)
    return {"claim": text, "kind": kind, "quote": quote, "key": key or text,
            "per_seed": per_seed, "wins": wins, "ties": ties,
            "losses": len(per_seed) - wins - ties, "seeds": len(per_seed),
            "pass": wins == len(per_seed), "foregone": foregone, "numbers": numbers}


def check(text: str, per_seed, numbers: str, *, key: str | None = None) -> dict:
    """A check of this project (not a claim of the paper)."""
    return claim(text, per_seed, numbers, kind=CHECK, key=key)


def verdict(c: dict) -> str:
    """"pass" (a win on every seed), "FAIL" (a loss on every seed), "tie" (a tie on every
    seed), otherwise "mixed" with the counts; "foregone: ..." for a foregone comparison."""
    if "wins" not in c:  # results written before ties were counted: seeds passed or not
        k, s = c.get("seeds_passed", int(c["pass"])), c.get("seeds", 1)
        v = ("pass" if s == 1 else f"pass {k}/{s}") if k == s else (
            "FAIL" if k == 0 else f"mixed {k}/{s}")
    else:
        w, t, s = c["wins"], c["ties"], c["seeds"]
        if w == s:
            v = "pass" if s == 1 else f"pass {w}/{s}"
        elif c["losses"] == s:
            v = "FAIL"
        elif t == s:
            v = "tie"
        else:
            v = f"mixed {w}/{t}/{c['losses']} (win/tie/loss)"
    return f"foregone ({v})" if c.get("foregone") else v


def tally(claims: Sequence[dict]) -> dict:
    """Counts per kind, foregone comparisons apart: ``{kind: {"pass", "tie", "mixed",
    "fail", "total"}, "foregone": n}``. Raises ValueError for two claims with one key."""
    keys = [c.get("key", c["claim"]) for c in claims]
    dup = sorted({k for k in keys if keys.count(k) > 1})
    if dup:
        raise ValueError(f"claims counted twice: {dup}")
    out = {kind: {"pass": 0, "tie": 0, "mixed": 0, "fail": 0, "total": 0} for kind in KINDS}
    out["foregone"] = 0
    for c in claims:
        if c.get("foregone"):
            out["foregone"] += 1
            continue
        v = verdict(c)
        bucket = out[c.get("kind", PAPER)]
        bucket["total"] += 1
        bucket["pass" if v.startswith("pass") else "tie" if v == "tie" else
               "fail" if v == "FAIL" else "mixed"] += 1
    return out


def _count(t: dict) -> str:
    return (f"{t['pass']}/{t['total']} pass on every seed, {t['tie']} ties, {t['mixed']} "
            f"mixed, {t['fail']} FAIL")


def render(claims: list[dict]) -> list[str]:
    """Markdown: (a) the paper's claims at its own settings, quoted; (b) the same
    comparisons at the project's panels; (c) the project's checks; (d) foregone
    comparisons, not counted."""
    t = tally(claims)
    lines = []
    live = [c for c in claims if not c.get("foregone")]
    sections = (
        (PAPER, "(a) The paper's claims, at the paper's settings"),
        (PANEL, "(b) The paper's comparisons at this project's settings (mu as a fraction "
                "of mu_deg; the paper never ran them: not its claims)"),
    )
    for kind, title in sections:
        rows = [c for c in live if c.get("kind", PAPER) == kind]
        if rows:
            lines += [f"{title}: **{_count(t[kind])}**.", "",
                      "| verdict | claim | the paper's words | numbers |", "|---|---|---|---|"]
            for c in rows:
                quote = f"\"{_cell(c['quote'])}\"" if c.get("quote") else ""
                lines.append(f"| {_bold(c)} | {_cell(c['claim'])} | {quote} | "
                             f"{_cell(c['numbers'])} |")
            lines.append("")
    checks = [c for c in live if c.get("kind") == CHECK]
    if checks:
        lines += [f"(c) The project's own checks (not claims of the paper): "
                  f"**{_count(t[CHECK])}**.", "", "| verdict | check | numbers |",
                  "|---|---|---|"]
        for c in checks:
            lines.append(f"| {_bold(c)} | {_cell(c['claim'])} | {_cell(c['numbers'])} |")
        lines.append("")
    foregone = [c for c in claims if c.get("foregone")]
    if foregone:
        lines += [f"(d) Foregone comparisons, not counted: **{len(foregone)}**.", "",
                  "| comparison | why foregone | numbers |", "|---|---|---|"]
        for c in foregone:
            lines.append(f"| {_cell(c['claim'])} | {_cell(c['foregone'])} | "
                         f"{_cell(c['numbers'])} |")
        lines.append("")
    return lines


def _cell(text: str) -> str:
    """Text for a Markdown table cell: a "|" (as in |Omega|) would split the cell."""
    return str(text).replace("\\|", "|").replace("|", "\\|")


def _bold(c) -> str:
    v = verdict(c)
    return v if v.startswith("pass") else f"**{v}**"
