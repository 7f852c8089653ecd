"""Paired re-reading of readings D and F after the skew core's review fixes (research; no rules).

Commit e1e4b34 changed the maxima of every core shape that carries the ops' third cumulants
(skew, kurtosis, and cumulant through its kurtosis recorder): the variance's Stein term takes
``kappa(e, D, D)`` and each op's skewness enters the op ring clipped to +-1. Readings D and F of
``validation/core_shape_choice.py`` chose ``auto``'s shapes for the classes with skewed ops on the
code before it. This script reads rows of that script (``--json``) measured with the same seed,
hence the same Monte Carlo samples, on up to three codes (the reading's own rows, 82fc368 and
HEAD), checks that the samples are the same (the Monte Carlo-only fields of every row are equal),
prints the KS of each shape per case side by side, and applies the reading's own criterion
(:func:`core_shape_choice.v4_class`; reading F with :data:`core_shape_choice.EARLIER_LOWEST_F`)
to each (class, band) on each code, beside the shape ``auto`` used on HEAD. It changes no rule.

Usage::

    python validation/skew_core_k3_review.py --reading d [--labels D,old,new]
        ROWS_D.json OLD.json NEW.json
    python validation/skew_core_k3_review.py --reading f [--labels F,old,new]
        ROWS_F.json OLD.json NEW.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from core_shape_choice import (  # noqa: E402
    EARLIER_LOWEST_F,
    SHAPES4,
    _by_class_band,
    _cases,
    class_summary,
    v4_class,
)

#: Fields that depend on the Monte Carlo sample only: equal on every code iff it is the same.
MC_FIELDS = ("samples", "seed", "dkw_95", "p99_ci", "spread_ci")


def load(path: str, only_skewed: bool = True) -> dict[str, dict[str, dict]]:
    """Rows of ``path`` by case and shape (only classes with skewed ops by default)."""
    with open(path) as fh:
        rows = json.load(fh)
    if only_skewed:
        rows = [r for r in rows if r["class"].endswith("skewed ops")]
    return _cases(rows)


def same_samples(codes: list[dict[str, dict[str, dict]]]) -> list[str]:
    """Cases whose Monte Carlo-only fields differ between codes (empty: the same samples)."""
    bad = []
    for name, shapes in codes[-1].items():
        ref = shapes["normal"]
        for other in codes[:-1]:
            row = other.get(name, {}).get("normal")
            if row is None or any(row[f] != ref[f] for f in MC_FIELDS):
                bad.append(name)
                break
    return bad


def case_table(codes: list[dict[str, dict[str, dict]]], labels: list[str]) -> str:
    """One line per case (cases of the last code): KS per shape on each code, ``a -> b -> c``."""
    shapes = list(SHAPES4)
    heads = " | ".join(f"KS {s} " + " -> ".join(labels) for s in shapes)
    out = [
        f"| class | case | {heads}"
        " | mean err (sd) kurtosis | std err kurtosis | auto (last code) | DKW 95% |",
        "|---|---|" + "---|" * len(shapes) + "---|---|---|---|",
    ]
    for name, sh in codes[-1].items():
        rows = [c[name] for c in codes if name in c]
        ks = [" -> ".join(f"{r[s]['ks']:.4f}" for r in rows) for s in shapes]
        k = [r["kurtosis"] for r in rows]
        out.append(
            f"| {sh['normal']['class']} | {name} | "
            + " | ".join(ks)
            + " | "
            + " -> ".join(f"{r['mean_err_sd']:+.3f}" for r in k)
            + " | "
            + " -> ".join(f"{r['std_err']:+.2%}" for r in k)
            + f" | {sh.get('auto', {}).get('used') or '-'} | {sh['normal']['dkw_95']:.4f} |"
        )
    return "\n".join(out)


def verdicts(codes: list[dict[str, dict[str, dict]]], labels: list[str], reading: str) -> str:
    """Per (class, band): worst-case KS per shape and the reading's pick on each code."""
    earlier = EARLIER_LOWEST_F if reading == "f" else None
    out = [
        "| class | band | variants | code | worst KS [band] normal / skew / kurtosis / cumulant "
        "| both targets met n / s / k / c | candidate: conditions 1-5 | pick | auto (last code) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    keys = _by_class_band(codes[-1]).keys()
    for key in keys:
        autos = sorted(
            {v.get("auto", {}).get("used") or "-" for v in _by_class_band(codes[-1])[key]}
        )
        for label, code in zip(labels, codes):
            variants = _by_class_band(code).get(key, [])
            if len(variants) != len(_by_class_band(codes[-1])[key]):
                out.append(f"| {key[0]} | {key[1]} | {len(variants)} | {label} | not all read |")
                continue
            pick, conds = v4_class(*key, variants, earlier)
            summ = {s: class_summary(variants, s) for s in SHAPES4}
            worst = " / ".join(
                f"{summ[s]['W']:.4f} [{summ[s]['W_lo']:.4f}, {summ[s]['W_hi']:.4f}]"
                for s in SHAPES4
            )
            cand = "; ".join(
                f"{s}: " + "".join("y" if ok else "n" for ok in c) for s, c in conds.items()
            )
            met = " / ".join(str(summ[s]["met"]) for s in SHAPES4)
            out.append(
                f"| {key[0]} | {key[1]} | {len(variants)} | {label} | {worst} | {met} "
                f"| {cand} | {pick} | {', '.join(autos)} |"
            )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """Print the sample check, the per-case table and the per-(class, band) verdicts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reading", choices=("d", "f"), required=True)
    ap.add_argument(
        "--labels",
        type=lambda s: s.split(","),
        help="comma-separated, one label per JSON (default: file stems)",
    )
    ap.add_argument("json", nargs="+", help="rows of core_shape_choice.py --json, oldest first")
    args = ap.parse_args(argv)
    labels = args.labels or [Path(p).stem for p in args.json]
    if len(labels) != len(args.json):
        raise ValueError(f"--labels needs one label per JSON ({len(args.json)}), got {labels}")
    codes = [load(p) for p in args.json]
    bad = same_samples(codes)
    print(f"cases: {len(codes[-1])}; Monte Carlo fields differ on: {bad or 'none'}\n")
    print(case_table(codes, labels) + "\n")
    print(verdicts(codes, labels, args.reading))
    return 0


if __name__ == "__main__":
    sys.exit(main())
