"""The default variability, fitted to public step logs and collective latencies.

Four magnitudes of ``variability`` are set from measurements, leaving one system out at a
time on the MLPerf step logs (``shared/data/mlperf_training_set`` and
``shared/data/mlperf_llama405b``; systems: Tyche GB200, Theia GB300, HiPerGator B200,
Carina GB200):

* ``spatial.cv``: the persistent per-GPU speed spread. A run's median step is gated by the
  slowest of its G GPUs, so across runs (fresh allocations) ``ln`` of the run median varies
  with the variance of the maximum of G lognormal factors, ``s^2 v(G)`` with ``s^2 =
  ln(1 + cv^2)`` and ``v(G)`` the variance of the largest of G standard normals (exact
  integral), plus the sampling variance of a run's median ((pi/2) s_w^2 / n, s_w the run's
  robust within-run sd). Maximum likelihood over the cases' sample variances (chi-square with
  R - 1 degrees of freedom each). Whatever else differs between runs is attributed to it:
  an upper estimate.
* ``spatial.slow_fraction``: GPUs at ``slow_factor``. A run holding one is slower than a run
  that does not by ``slow_factor - 1``; a run is counted slow when its median exceeds its
  case's fastest run by more than half that. With q = 1 - (1 - f)^G the chance a run holds
  one, a case's count of slow runs k of R has P(k = 0) = (1 - q)^R + q^R (all runs slow look
  alike) and binomial otherwise. Maximum likelihood in [0, 0.05] and the 95% profile bound.
* ``temporal.step_jitter_rel``: the per-step jitter as a fraction of the deterministic
  step: per case the robust within-run sd of ``ln(step / run median)`` (1.4826 MAD, steps
  after an evaluation pause left out) over the jitter law's own robust-sd-to-sd ratio
  (gamma with mean 3 sd); per system the median of its cases; the default the median of
  the systems.
* ``network.inter_node.sigma``: the body of a large inter-node collective's latency from
  ``shared/data/collective_latency`` (Leonardo, MPI Allreduce): every file of >= 64 MB
  messages at >= 512 nodes, ``ln(p90/p50) / 1.2816``, median (training's data-parallel
  and pipeline messages are tens to hundreds of MB). Not from MLPerf, so the same in every
  leave-one-out fold.

API (``validation/fit_defaults.py`` calls it): :func:`fit` (cases -> defaults with their
sources), :func:`table` (predicted vs measured p90/p50 and the median's widening over the
deterministic core), :func:`load_cases`.

Run: ``nice -n 10 python validation/fit_variability.py [--out FILE.md]`` (a few minutes:
three engine evaluations per case and fold).
"""

from __future__ import annotations

import argparse
import csv
import math
import re
import sys
import tarfile
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import integrate, optimize, stats

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "validation" / "configs"

__all__ = [
    "Case",
    "as_case",
    "NO_VARIABILITY",
    "PRIOR_DEFAULTS",
    "apply_defaults",
    "decompose",
    "decompose_table",
    "fit",
    "fit_jitter_rel",
    "fit_slow_fraction",
    "fit_spatial_cv",
    "jitter_robust_ratio",
    "load_cases",
    "loso_table",
    "max_normal_var",
    "measured_table",
    "network_sigma",
    "table",
]

#: Variability that makes the step deterministic (the "core" a prediction widens).
NO_VARIABILITY: dict[str, Any] = {
    "variability": {
        "spatial": {"cv": 0.0, "slow_fraction": 0.0},
        "temporal": {"kernel_cv": 0.0, "step_jitter_s": 0.0, "step_jitter_rel": 0.0},
        "network": {
            t: {"sigma": 0.0, "tail_prob": 0.0} for t in ("intra_node", "inter_node", "cross_dc")
        },
        "hiccups": {"probability": 0.0},
    }
}

#: The defaults before this fit (Longhorn V100 spatial spread, no jitter, the 8 MB
#: collective body), for the before/after table.
PRIOR_DEFAULTS: dict[str, float] = {
    "variability.spatial.cv": 0.017,
    "variability.spatial.slow_fraction": 0.010,
    "variability.temporal.step_jitter_rel": 0.0,
    "variability.network.inter_node.sigma": 0.17,
}

_SLOW_FACTOR = 1.10  # SpatialVariability.slow_factor: the outliers' mean factor (Longhorn)
_Z90 = stats.norm.ppf(0.9)


# --------------------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Case:
    """One measured job: every run's step times (warm-up and post-evaluation steps out).

    Attributes
    ----------
    name : str
    system : str
        The cluster (leave-one-out unit): ``tyche``, ``theia``, ``hipergator``, ``carina``.
    gpus : int
    runs : tuple of numpy.ndarray
        Step times (s) of each run.
    config : Path or None
        The job's TOML in ``validation/configs`` (None: no prediction for it).
    """

    name: str
    system: str
    gpus: int
    runs: tuple[np.ndarray, ...] = field(repr=False)
    config: Path | None = None

    @property
    def pooled(self) -> np.ndarray:
        """All runs' steps."""
        return np.concatenate(self.runs)

    @property
    def median_s(self) -> float:
        """Measured median step (runs pooled)."""
        return float(np.median(self.pooled))

    @property
    def p90_over_p50(self) -> float:
        """Measured p90/p50 (runs pooled; numpy's default quantile)."""
        t = self.pooled
        return float(np.quantile(t, 0.9) / np.median(t))


def _read_runs(folder: Path) -> tuple[np.ndarray, ...]:
    from prism_analytic.calibration.logs import read_step_log, without_pauses

    logs = [read_step_log(f) for f in sorted(folder.glob("result_*.txt"))]
    return tuple(lg.times_s for lg in without_pauses(logs) if lg.n)


def _config(round_: str, system: str, model: str, gpus: int) -> Path | None:
    if system == "carina":
        p = CONFIGS / f"mlperf_gb200_{gpus}.toml"
    else:
        hits = sorted(CONFIGS.glob(f"mlperf{round_}_{system}_*_{model}_{gpus}.toml"))
        p = hits[0] if hits else CONFIGS / "missing"
    return p if p.is_file() else None


def as_case(obj: Any, data_dir: str | Path | None = None) -> Case:
    """``obj`` as a :class:`Case`.

    A Case is returned as is; any other object needs ``name``, ``system``, ``gpus``,
    ``config`` and ``logs`` (paths under the shared data folder), such as
    ``validation/mlperf_cases.py``'s cases, whose runs are read here (post-evaluation steps
    out).
    """
    if isinstance(obj, Case):
        return obj
    from prism_analytic.calibration.logs import read_step_log, without_pauses
    from prism_analytic.datasets import data_root

    root = data_root(data_dir)
    logs = without_pauses([read_step_log(root / rel) for rel in obj.logs])
    runs = tuple(lg.times_s for lg in logs if lg.n)
    return Case(obj.name, str(obj.system).lower(), int(obj.gpus), runs, obj.config)


def load_cases(data_dir: str | Path | None = None) -> list[Case]:
    """Every MLPerf case of the two shared folders (see the module notes).

    Raises
    ------
    FileNotFoundError
        Neither folder is there.
    """
    from prism_analytic.datasets import data_root

    root = data_root(data_dir)
    cases = []
    for res in sorted((root / "mlperf_training_set").glob("v5.*/*/*/*/results")):
        round_ = res.parts[-5].replace("v", "").replace(".", "")
        folder, model = res.parts[-3].lower(), res.parts[-2]
        m = re.search(r"ngpu(\d+)|n(\d+)$", folder)
        system = re.split(r"[_.]", folder)[0].replace("hpg", "hipergator")
        if m is None or not model.startswith("llama31_"):
            continue
        gpus = int(m.group(1)) if m.group(1) else 8 * int(m.group(2))  # hpg.dgxb200x8.n<nodes>
        short = model.removeprefix("llama31_")
        runs = _read_runs(res)
        if runs:
            name = f"mlperf{round_}_{system}_{short}_{gpus}"
            cases.append(Case(name, system, gpus, runs, _config(round_, system, short, gpus)))
    for folder in sorted((root / "mlperf_llama405b").glob("carina_*_ngpu*")):
        gpus = int(re.search(r"ngpu(\d+)$", folder.name).group(1))
        runs = _read_runs(folder)
        if runs:
            cfg = _config("50", "carina", "405b", gpus)
            cases.append(Case(f"mlperf50_carina_405b_{gpus}", "carina", gpus, runs, cfg))
    if not cases:
        raise FileNotFoundError(f"no MLPerf step logs under {root}")
    return cases


# --------------------------------------------------------------------------------------
# Order statistics and robust spreads
# --------------------------------------------------------------------------------------
def max_normal_var(g: int) -> float:
    """Variance of the largest of ``g`` independent standard normals (numerical integral)."""
    if int(g) != g or g < 1:
        raise ValueError(f"g must be an integer >= 1, got {g!r}")
    if g == 1:
        return 1.0

    def logpdf(z: float) -> float:
        return math.log(g) + stats.norm.logpdf(z) + (g - 1) * stats.norm.logcdf(z)

    moments = [
        integrate.quad(lambda z, k=k: z**k * math.exp(logpdf(z)), -10, 12, limit=200)[0]
        for k in (1, 2)
    ]
    return moments[1] - moments[0] ** 2


def _robust_sd(x: np.ndarray) -> float:
    return float(stats.median_abs_deviation(x, scale="normal"))


def jitter_robust_ratio() -> float:
    """1.4826 MAD over sd of the jitter law (gamma of mean 3 sd; ``JITTER_MEAN_OVER_STD``)."""
    from prism_analytic.workload.config.variability import JITTER_MEAN_OVER_STD

    k = JITTER_MEAN_OVER_STD**2  # gamma shape with mean / sd = 3
    law = stats.gamma(k)
    med = law.median()
    mad = optimize.brentq(lambda d: law.cdf(med + d) - law.cdf(med - d) - 0.5, 1e-9, 10 * k)
    return 1.4826 * mad / math.sqrt(k)


# --------------------------------------------------------------------------------------
# The fits
# --------------------------------------------------------------------------------------
def _run_stats(case: Case) -> tuple[float, float]:
    """(sample variance of ln run medians, mean sampling variance of one run's ln median)."""
    y = np.log([np.median(r) for r in case.runs])
    tau2 = np.mean(
        [(math.pi / 2) * _robust_sd(np.log(r / np.median(r))) ** 2 / len(r) for r in case.runs]
    )
    return float(np.var(y, ddof=1)), float(tau2)


def fit_spatial_cv(cases: Sequence[Case]) -> dict[str, Any]:
    """Maximum-likelihood ``spatial.cv`` from the spread of run medians (module notes)."""
    rows = [(len(c.runs), max_normal_var(c.gpus), *_run_stats(c)) for c in cases if len(c.runs) > 1]
    if not rows:
        raise ValueError("no case with two runs or more")

    def nll(s: float) -> float:
        out = 0.0
        for r, v, s2, tau2 in rows:
            var = s * s * v + tau2
            out += 0.5 * (r - 1) * (math.log(var) + s2 / var)
        return out

    best = optimize.minimize_scalar(
        nll, bounds=(0.0, 0.2), method="bounded", options={"xatol": 1e-7}
    )
    s = float(best.x)
    cut = nll(s) + 0.5 * stats.chi2.ppf(0.95, 1)
    lo = 0.0 if nll(0.0) <= cut else optimize.brentq(lambda x: nll(x) - cut, 0.0, s)
    hi = optimize.brentq(lambda x: nll(x) - cut, s, 0.2) if nll(0.2) > cut else 0.2

    def cv(x: float) -> float:
        return math.sqrt(math.expm1(x * x))

    return {
        "value": cv(s),
        "interval95": (cv(lo), cv(hi)),
        "n_cases": len(rows),
        "n_runs": sum(r for r, *_ in rows),
    }


def fit_slow_fraction(cases: Sequence[Case], slow_factor: float = _SLOW_FACTOR) -> dict[str, Any]:
    """Maximum-likelihood ``spatial.slow_fraction`` from runs that stand out (module notes)."""
    thr = 1.0 + (slow_factor - 1.0) / 2.0
    obs = []
    for c in cases:
        meds = np.array([np.median(r) for r in c.runs])
        obs.append((c.gpus, len(meds), int(np.sum(meds > thr * meds.min()))))

    def nll(f: float) -> float:
        out = 0.0
        for g, r, k in obs:
            q = -math.expm1(g * math.log1p(-f)) if f > 0 else 0.0
            if k == 0:
                p = (1 - q) ** r + q**r
            else:
                p = math.comb(r, k) * q**k * (1 - q) ** (r - k)
            out -= math.log(max(p, 1e-300))
        return out

    grid = np.concatenate([[0.0], np.geomspace(1e-6, 0.05, 400)])
    ll = np.array([nll(f) for f in grid])
    f_hat = float(grid[np.argmin(ll)])
    ok = grid[(ll - ll.min() <= 0.5 * stats.chi2.ppf(0.95, 1)) & (grid >= f_hat)]
    return {
        "value": f_hat,
        "upper95": float(ok.max()),
        "slow_runs": sum(k for *_, k in obs),
        "runs": sum(r for _, r, _ in obs),
        "informative_gpu_runs": sum(g * r for g, r, _ in obs if g <= 72),
        "threshold": thr,
    }


def fit_jitter_rel(cases: Sequence[Case]) -> dict[str, Any]:
    """``temporal.step_jitter_rel``: median over systems of their cases' median (notes)."""
    ratio = jitter_robust_ratio()
    per_system: dict[str, list[float]] = defaultdict(list)
    for c in cases:
        w = np.concatenate([np.log(r / np.median(r)) for r in c.runs])
        per_system[c.system].append(_robust_sd(w) / ratio)
    sys_med = {s: float(np.median(v)) for s, v in sorted(per_system.items())}
    return {"value": float(np.median(list(sys_med.values()))), "per_system": sys_med}


def network_sigma(
    data_dir: str | Path | None = None, *, min_bytes: int = 64 << 20, min_nodes: int = 512
) -> dict[str, Any]:
    """``network.inter_node.sigma`` from large Allreduce messages at scale (module notes).

    Also returns the same statistic at 4-16 nodes (``small_nodes``), to show the growth with
    the nodes a collective spans.
    """
    from prism_analytic.datasets import data_root

    root = data_root(data_dir) / "collective_latency"
    meta = {}
    with (root / "leonardo_metadata.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            meta[(r["timestamp"], r["test_id"])] = r
    big, small = [], []
    for arch in sorted((root / "leonardo").glob("*.tar.gz")):
        stamp = arch.name.removesuffix(".tar.gz")
        with tarfile.open(arch) as tf:
            for m in tf.getmembers():
                parts = m.name.split("/")
                if not parts[-1].endswith("_int32.csv") or len(parts) < 2:
                    continue
                md = meta.get((stamp, parts[-2]))
                count = parts[-1].split("_", 1)[0]
                if md is None or md["collective_type"].lower() != "allreduce":
                    continue
                if not count.isdigit() or 4 * int(count) < min_bytes:
                    continue
                lines = tf.extractfile(m).read().decode().splitlines()[2:]  # header, warm-up
                x = np.array([float(ln.split(",")[0]) for ln in lines if ln.strip()])
                if len(x) < 4:
                    continue
                s = math.log(np.quantile(x, 0.9) / np.median(x)) / _Z90
                nodes = int(md["nnodes"])
                if nodes >= min_nodes:
                    big.append(s)
                elif nodes <= 16:
                    small.append(s)
    if not big:
        raise FileNotFoundError(f"no Allreduce >= {min_bytes} B at >= {min_nodes} nodes in {root}")
    return {
        "value": float(np.median(big)),
        "n_files": len(big),
        "iqr": (float(np.quantile(big, 0.25)), float(np.quantile(big, 0.75))),
        "small_nodes": float(np.median(small)) if small else float("nan"),
        "n_small": len(small),
    }


def fit(cases: Sequence[Case], data_dir: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """The fitted default variability: ``{dotted key: {"value", "source", ...}}``.

    Parameters
    ----------
    cases : sequence of Case
        The fitting cases (leave a system out by leaving its cases out); other case objects
        are read by :func:`as_case`.
    data_dir : str or Path, optional
        The shared data folder, for ``collective_latency`` (the network body is left out of
        the result when it is absent) and the logs of cases given by path.
    """
    cases = [as_case(c, data_dir) for c in cases]
    systems = sorted({c.system for c in cases})
    where = f"MLPerf step logs of {', '.join(systems)} ({len(cases)} cases)"
    out: dict[str, dict[str, Any]] = {}
    sp = fit_spatial_cv(cases)
    out["variability.spatial.cv"] = {
        **sp,
        "source": f"ML on the spread of {sp['n_runs']} run medians over max-of-G order"
        f" statistics; {where}",
    }
    sl = fit_slow_fraction(cases)
    out["variability.spatial.slow_fraction"] = {
        **sl,
        "source": f"ML: {sl['slow_runs']} of {sl['runs']} runs > {sl['threshold']:.2f}x their"
        f" case's fastest; {where}",
    }
    ji = fit_jitter_rel(cases)
    out["variability.temporal.step_jitter_rel"] = {
        **ji,
        "source": f"median over systems of the within-run robust sd / {jitter_robust_ratio():.3f}"
        f"; {where}",
    }
    try:
        ns = network_sigma(data_dir)
    except FileNotFoundError:
        return out
    out["variability.network.inter_node.sigma"] = {
        **ns,
        "source": f"median ln(p90/p50)/1.2816 of {ns['n_files']} Allreduce files >= 64 MB at"
        " >= 512 nodes, shared/data/collective_latency (Leonardo)",
    }
    return out


# --------------------------------------------------------------------------------------
# Predictions
# --------------------------------------------------------------------------------------
def _nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *path, leaf = key.split(".")
        node = out
        for k in path:
            node = node.setdefault(k, {})
        node[leaf] = value["value"] if isinstance(value, Mapping) else value
    return out


def apply_defaults(job: Any, defaults: Mapping[str, Any]) -> Any:
    """``job`` with the dotted-key ``defaults`` (values or ``{"value": ...}``) merged in."""
    from prism_analytic.workload.jobs import merge_config

    return merge_config(job, _nested(defaults), check_layout=False)


def _predict(job: Any) -> tuple[float, float, float]:
    """(p50, p90, deterministic core p50) of ``job`` by the analytic engine."""
    from prism_analytic.workload.jobs import merge_config
    from prism_analytic.workload.prediction import predict_job

    res = predict_job(job)[0]
    core = predict_job(merge_config(job, NO_VARIABILITY, check_layout=False))[0]
    return float(res.quantile(0.5)), float(res.quantile(0.9)), float(core.quantile(0.5))


def _row(case: Case, defaults: Mapping[str, Any] | None) -> dict[str, Any]:
    from prism_analytic.workload.jobs import load_config

    row: dict[str, Any] = {
        "case": case.name,
        "system": case.system,
        "gpus": case.gpus,
        "measured_median_s": case.median_s,
        "measured_p90_p50": case.p90_over_p50,
    }
    if case.config is None:
        return row
    job = load_config(case.config, check_layout=False)
    if defaults:
        job = apply_defaults(job, defaults)
    p50, p90, core = _predict(job)
    row.update(core_s=core, p50_s=p50, p90_p50=p90 / p50, widening=p50 / core)
    return row


def rows(cases: Iterable[Case], defaults: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One row per case: measured and predicted (``defaults`` None: the code's defaults)."""
    return [_row(c, defaults) for c in cases]


def _fmt(rows_: Sequence[Mapping[str, Any]]) -> str:
    head = (
        "| case | GPUs | core p50 (s) | pred p50 (s) | p50 / core | measured median (s)"
        " | pred / meas | pred p90/p50 | meas p90/p50 | diff |\n"
        "|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows_:
        if "p50_s" not in r:
            lines.append(
                f"| {r['case']} | {r['gpus']} | | | | {r['measured_median_s']:.4f} | |"
                f" | {r['measured_p90_p50']:.4f} | (no config) |"
            )
            continue
        lines.append(
            f"| {r['case']} | {r['gpus']} | {r['core_s']:.4f} | {r['p50_s']:.4f} |"
            f" {r['widening']:.4f} | {r['measured_median_s']:.4f} |"
            f" {r['p50_s'] / r['measured_median_s']:.3f} | {r['p90_p50']:.4f} |"
            f" {r['measured_p90_p50']:.4f} | {r['p90_p50'] - r['measured_p90_p50']:+.4f} |"
        )
    return "\n".join(lines)


def table(cases: Iterable[Case], defaults: Mapping[str, Any] | None) -> str:
    """Markdown table of predicted vs measured p90/p50 and the median's widening.

    ``defaults`` (as :func:`fit` returns, or plain dotted-key values) is merged into each
    case's config; None keeps the code's defaults.
    """
    return _fmt(rows(cases, defaults))


def loso_rows(
    cases: Sequence[Case], data_dir: str | Path | None = None
) -> tuple[list[dict[str, Any]], dict[str, dict[str, dict[str, Any]]]]:
    """Each system's cases predicted with the defaults fitted on the other systems."""
    cases = [as_case(c, data_dir) for c in cases]
    folds, out = {}, []
    for system in sorted({c.system for c in cases}):
        defaults = fit([c for c in cases if c.system != system], data_dir)
        folds[system] = defaults
        out += rows([c for c in cases if c.system == system], defaults)
    return out, folds


def loso_table(cases: Sequence[Case], data_dir: str | Path | None = None) -> str:
    """:func:`table` with every system's defaults fitted without it."""
    return _fmt(loso_rows(cases, data_dir)[0])


def measured_table(cases: Iterable[Case], skip: int = 30) -> str:
    """Markdown table of what the logs show: spreads within and between runs, by case.

    ``skip``: the p90/p50 with each run's first ``skip`` steps also left out (a warm-up
    transient that the step law does not model).
    """
    lines = [
        "| case | GPUs | runs | steps | median (s) | p90/p50 | within-run robust sd"
        f" | run-median CV | p90/p50 without {skip} first steps |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cases:
        w = np.concatenate([np.log(r / np.median(r)) for r in c.runs])
        meds = np.array([np.median(r) for r in c.runs])
        late = np.concatenate([r[skip:] for r in c.runs])
        lines.append(
            f"| {c.name} | {c.gpus} | {len(c.runs)} | {len(c.pooled)} | {c.median_s:.4f} |"
            f" {c.p90_over_p50:.4f} | {_robust_sd(w):.4f} | {meds.std() / meds.mean():.4f} |"
            f" {np.quantile(late, 0.9) / np.median(late):.4f} |"
        )
    return "\n".join(lines)


#: One term of the variability each, switched off (``decompose``).
TERMS: dict[str, dict[str, Any]] = {
    "spatial body": {"variability": {"spatial": {"cv": 0.0}}},
    "slow GPUs": {"variability": {"spatial": {"slow_fraction": 0.0}}},
    "kernel noise": {"variability": {"temporal": {"kernel_cv": 0.0}}},
    "step jitter": {"variability": {"temporal": {"step_jitter_s": 0.0, "step_jitter_rel": 0.0}}},
    "network": {"variability": {"network": NO_VARIABILITY["variability"]["network"]}},
    "hiccups": {"variability": {"hiccups": {"probability": 0.0}}},
}


def decompose(case: Case, defaults: Mapping[str, Any] | None) -> dict[str, float]:
    """Points of median widening (p50 / core - 1, in %) each term adds, by switching it off.

    Returns ``{"total": ..., term: p50 with everything - p50 without the term (% of the
    core)}``; terms interact (a max of sums), so the parts need not add up to the total.
    """
    from prism_analytic.workload.jobs import load_config, merge_config
    from prism_analytic.workload.prediction import predict_job

    if case.config is None:
        raise ValueError(f"{case.name}: no config")
    job = load_config(case.config, check_layout=False)
    if defaults:
        job = apply_defaults(job, defaults)
    p50, _, core = _predict(job)
    out = {"total": 100 * (p50 / core - 1)}
    for name, off in TERMS.items():
        try:
            q = float(predict_job(merge_config(job, off, check_layout=False))[0].quantile(0.5))
        except ZeroDivisionError:  # an engine failure on near-deterministic ops: shown as nan
            q = math.nan
        out[name] = 100 * (p50 - q) / core
    return out


def decompose_table(cases: Iterable[Case], defaults: Mapping[str, Any] | None) -> str:
    """Markdown table of :func:`decompose` for ``cases``."""
    lines = [
        "| case | widening (%) | " + " | ".join(TERMS) + " |",
        "|---|---|" + "---|" * len(TERMS),
    ]
    for c in cases:
        d = decompose(c, defaults)
        lines.append(
            f"| {c.name} | {d['total']:.2f} | " + " | ".join(f"{d[t]:.2f}" for t in TERMS) + " |"
        )
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------
def _summary(rows_: Sequence[Mapping[str, Any]]) -> str:
    r = [x for x in rows_ if "p50_s" in x]
    if not r:
        return "no predictions"
    d = [abs(x["p90_p50"] - x["measured_p90_p50"]) for x in r]
    w = [x["widening"] for x in r]
    e = [x["p50_s"] / x["measured_median_s"] - 1 for x in r]
    return (
        f"{len(r)} cases: |p90/p50 error| max {max(d):.4f} (median {np.median(d):.4f}), within"
        f" 0.01 on {sum(x <= 0.01 for x in d)}; median widening over the core"
        f" {min(w):.4f}-{max(w):.4f}; median error {min(e):+.1%} to {max(e):+.1%}"
    )


def _defaults_text(d: Mapping[str, Mapping[str, Any]]) -> str:
    lines = []
    for k, v in d.items():
        extra = ""
        if "interval95" in v:
            extra = f" (95% [{v['interval95'][0]:.4f}, {v['interval95'][1]:.4f}])"
        elif "upper95" in v:
            extra = f" (95% upper bound {v['upper95']:.4f})"
        elif "per_system" in v:
            extra = " (" + ", ".join(f"{s} {x:.4f}" for s, x in v["per_system"].items()) + ")"
        elif "small_nodes" in v:
            iqr = f"{v['iqr'][0]:.4f}-{v['iqr'][1]:.4f}"
            extra = f" (IQR {iqr}; at 4-16 nodes {v['small_nodes']:.4f})"
        lines.append(f"- `{k}` = {v['value']:.4g}{extra}: {v['source']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Fit on every system, then the leave-one-system-out table (and the prior defaults')."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=None, help="shared data folder (default: ../shared/data)")
    ap.add_argument("--out", default=None, help="also write the report to this markdown file")
    ap.add_argument("--skip-prior", action="store_true", help="no table of the prior defaults")
    ap.add_argument(
        "--decompose",
        nargs="*",
        default=[],
        metavar="CASE",
        help="cases whose median widening is split by term (e.g. mlperf50_carina_405b_512)",
    )
    args = ap.parse_args(argv)
    cases = load_cases(args.data)
    parts = ["## Measured", measured_table(cases)]
    parts += ["## Fitted on every system", _defaults_text(fit(cases, args.data))]
    lo, folds = loso_rows(cases, args.data)
    parts += ["## Folds (fitted without the named system)"]
    for s, d in folds.items():
        vals = ", ".join(f"{k.rsplit('.', 1)[1]} {v['value']:.4g}" for k, v in d.items())
        parts.append(f"- without {s}: {vals}")
    parts += ["## Leave one system out", _summary(lo), "", _fmt(lo)]
    if not args.skip_prior:
        pr = rows(cases, PRIOR_DEFAULTS)
        parts += ["## The prior defaults", _summary(pr), "", _fmt(pr)]
    if args.decompose:
        pick = [c for c in cases if c.name in args.decompose and c.config is not None]
        parts += [
            "## What widens the median (points of the core; prior defaults)",
            decompose_table(pick, PRIOR_DEFAULTS),
            "## What widens the median (the code's defaults)",
            decompose_table(pick, None),
        ]
    text = "\n\n".join(parts) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
