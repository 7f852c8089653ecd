"""How a collective's latency noise grows with the number of nodes it spans.

Model (one mechanism, stated so that it can fail): an iteration of a collective over ``N``
nodes ends when its slowest node ends, and nodes are independent and alike, so the
iteration's latency is ``c(N) * max(X_1, ..., X_N)`` with ``c`` a deterministic scale and
each node's multiplier ``X = B * T``: ``B`` lognormal (median 1, shape ``sigma``) and ``T``
a rare per-node hiccup, ``1`` with probability ``1 - q`` and otherwise lognormal with
median ``f`` and shape ``tail_sigma``. Ratios of quantiles do not depend on ``c``, so the
per-node law is fitted to the quantile ratios ``Q(p) / Q(0.5)`` measured at small node
counts (nonlinear least squares in log space) and the ratios at larger ``N`` follow from
``F(x)^N``. The 90% interval of a predicted ratio is the sampling spread for the measured
number of iterations (parametric: draws from the fitted law, not the fit's own error).

Data: ``collective_latency`` (PICO on Leonardo, MPI; :func:`load_latencies`), per-iteration
time of the slowest rank (SOURCE.md); the first iteration of a file is a warm-up and is
dropped.
"""

from __future__ import annotations

import csv
import io
import math
import tarfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, special

from ..datasets import data_root

__all__ = [
    "LEVELS",
    "NodeNoise",
    "load_latencies",
    "load_metadata",
    "archive_files",
    "fit_node_noise",
    "ratio_quantiles",
    "predicted_ratio_interval",
]

#: Quantile levels whose ratios to the median are fitted.
LEVELS = (0.75, 0.9, 0.95, 0.99)


def load_latencies(
    archive: str, test_id: int, algorithm: str, count: int, data_dir: str | Path | None = None
) -> np.ndarray:
    """Per-iteration latencies (seconds) of one file of ``collective_latency/leonardo``.

    Parameters
    ----------
    archive : str
        Timestamp, e.g. ``"2025_03_28___18_19_43"``.
    test_id : int
    algorithm : str
        E.g. ``"rabenseifner_ompi"``.
    count : int
        int32 elements.
    """
    path = data_root(data_dir) / "collective_latency" / "leonardo" / f"{archive}.tar.gz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    name = f"{archive}/{test_id}/{count}_{algorithm}_int32.csv"
    with tarfile.open(path) as tar:
        try:
            member = tar.getmember(name)
        except KeyError:
            raise ValueError(f"{path.name} has no {name!r}") from None
        text = tar.extractfile(member).read().decode()
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or rows[0][:1] != ["highest"]:
        raise ValueError(f"{name}: expected a 'highest' column")
    vals = np.array([float(r[0]) for r in rows[1:] if r], dtype=float) * 1e-9
    return vals[1:]  # warm-up iteration


def load_metadata(data_dir: str | Path | None = None) -> dict[tuple[str, int], dict]:
    """``leonardo_metadata.csv`` as ``{(archive, test_id): row}``.

    ``nnodes`` and ``tasks_per_node`` become ints, ``gpu_awareness`` a bool.
    """
    path = data_root(data_dir) / "collective_latency" / "leonardo_metadata.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    out = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            row["nnodes"] = int(row["nnodes"])
            row["tasks_per_node"] = int(row["tasks_per_node"])
            row["gpu_awareness"] = row["gpu_awareness"] == "yes"
            out[(row["timestamp"], int(row["test_id"]))] = row
    return out


def archive_files(archive: str, data_dir: str | Path | None = None) -> list[tuple[int, str, int]]:
    """``(test_id, algorithm, count)`` of every per-iteration file in one archive."""
    path = data_root(data_dir) / "collective_latency" / "leonardo" / f"{archive}.tar.gz"
    if not path.is_file():
        raise FileNotFoundError(f"{path} not found")
    out = []
    with tarfile.open(path) as tar:
        for name in tar.getnames():
            parts = name.split("/")
            if len(parts) == 3 and parts[2].endswith("_int32.csv"):
                count, algo = parts[2][: -len("_int32.csv")].split("_", 1)
                out.append((int(parts[1]), algo, int(count)))
    return sorted(out)


@dataclass(frozen=True)
class NodeNoise:
    """Per-node latency multiplier ``B * T`` (see the module notes)."""

    sigma: float
    q: float
    f: float
    tail_sigma: float

    def cdf(self, x: np.ndarray) -> np.ndarray:
        """P(X <= x) for one node."""
        lx = np.log(np.maximum(np.asarray(x, dtype=float), 1e-300))
        body = special.ndtr(lx / self.sigma)
        s = math.hypot(self.sigma, self.tail_sigma)
        tail = special.ndtr((lx - math.log(self.f)) / s)
        return (1 - self.q) * body + self.q * tail

    def max_quantile(self, p: np.ndarray, n: int) -> np.ndarray:
        """Quantiles of the slowest of ``n`` nodes: ``F^-1(p^(1/n))``, by bisection in log x."""
        target = np.exp(np.log(np.asarray(p, dtype=float)) / n)
        lo = np.full(target.shape, -20.0)
        hi = np.full(target.shape, 20.0)
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            below = self.cdf(np.exp(mid)) < target
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        return np.exp(0.5 * (lo + hi))

    def to_dict(self) -> dict:
        """Plain dict."""
        return asdict(self)


def ratio_quantiles(model: NodeNoise, n: int, levels=LEVELS) -> np.ndarray:
    """``Q(p) / Q(0.5)`` of the slowest of ``n`` nodes at ``levels``."""
    q = model.max_quantile(np.array([0.5, *levels]), n)
    return q[1:] / q[0]


def _measured_ratios(x: np.ndarray, levels=LEVELS) -> np.ndarray:
    return np.quantile(x, levels) / np.median(x)


def fit_node_noise(samples: dict[int, np.ndarray], levels=LEVELS) -> tuple[NodeNoise, float]:
    """Fit the per-node law to measured iterations at several node counts.

    Parameters
    ----------
    samples : dict
        ``{nodes: per-iteration latencies}`` (same collective, algorithm and message size).

    Returns
    -------
    (NodeNoise, rms)
        The fitted law and the root-mean-square log-ratio residual.
    """
    if not samples:
        raise ValueError("samples must hold at least one node count")
    for n, x in samples.items():
        if len(x) < 20:
            raise ValueError(f"{n} nodes: {len(x)} iterations, need >= 20 to fit quantile ratios")
    targets = {n: np.log(_measured_ratios(x, levels)) for n, x in samples.items()}

    def unpack(v: np.ndarray) -> NodeNoise:
        return NodeNoise(
            sigma=math.exp(v[0]),
            q=special.expit(v[1]),
            f=1.0 + math.exp(v[2]),
            tail_sigma=math.exp(v[3]),
        )

    def resid(v: np.ndarray) -> np.ndarray:
        m = unpack(v)
        return np.concatenate(
            [np.log(ratio_quantiles(m, n, levels)) - t for n, t in targets.items()]
        )

    best = None
    for q0 in (-9.0, -6.0, -3.0):
        for f0 in (-1.0, 1.0):
            v0 = np.array([math.log(0.01), q0, f0, math.log(0.3)])
            # bounds keep the law plausible: body and tail shapes <= 1.5, tail median <= 100x
            r = optimize.least_squares(
                resid,
                v0,
                method="trf",
                max_nfev=400,
                bounds=([-12, -16, -6, -8], [math.log(1.5), 0, math.log(99), math.log(1.5)]),
            )
            if best is None or r.cost < best.cost:
                best = r
    rms = float(np.sqrt(np.mean(best.fun**2)))
    return unpack(best.x), rms


def predicted_ratio_interval(
    model: NodeNoise, n: int, iterations: int, *, reps: int = 400, seed: int = 0, levels=(0.9, 0.99)
) -> dict[float, tuple[float, float, float]]:
    """For each level: (5%, 50%, 95%) of the sample ratio ``Q(p)/Q(0.5)`` over ``iterations``."""
    rng = np.random.default_rng(seed)
    grid_p = np.linspace(0, 1, 4001)[1:-1]
    grid_x = model.max_quantile(grid_p, n)
    u = rng.uniform(grid_p[0], grid_p[-1], size=(reps, iterations))
    draws = np.interp(u, grid_p, grid_x)
    med = np.median(draws, axis=1)
    out = {}
    for p in levels:
        r = np.quantile(draws, p, axis=1) / med
        out[p] = (float(np.quantile(r, 0.05)), float(np.median(r)), float(np.quantile(r, 0.95)))
    return out
