"""The parallel layout of a traced job, and its check against the structure recovered from data.

A layout comes from ``meta-<name>.yaml`` beside a ``trace-<name>.*`` file (the format of the
shared straggler traces: ``dp_size, pp_size, tp_size, dsp_size, vpp_size, world_size``, and
optionally ``cp_size, ep_size, schedule, microbatches``) or from a command-line string
``dp=..,pp=..,tp=..,cp=..,sp=..,ep=..,vpp=..`` which overrides it.

Ranks follow Megatron's default order (``tp-cp-ep-dp-pp``):
``rank = tp_i + tp * (cp_i + cp * (dp_i + dp * stage))``; Ulysses sequence parallel (``sp``,
``dsp_size``) takes the context-parallel slot; expert-parallel groups are blocks of ``ep``
consecutive indices ``cp_i + cp * dp_i`` within one stage and tensor rank.

:func:`check_layout` compares the recovered communication units with the layout: every
collective instance must be the recorded members of one process group of the layout (a set of
dimensions that vary while the others are fixed, an expert group, or a subset of a pipeline
group such as the embedding group), every p2p pair must join pipeline neighbours or
context-parallel ring neighbours, the ``dp_rank`` / ``stage`` columns must agree with the
rank order, and no op may be recorded in a model chunk beyond ``vpp``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

__all__ = ["Layout", "parse_layout", "read_layout_meta", "find_layout_meta", "check_layout"]

#: Keys of ``--layout`` and what they are.
LAYOUT_KEYS = {
    "dp": "data-parallel size",
    "pp": "pipeline stages",
    "tp": "tensor-parallel size",
    "cp": "ring context-parallel size",
    "sp": "Ulysses sequence-parallel size (dsp_size)",
    "ep": "expert-parallel size (divides dp * cp)",
    "vpp": "virtual pipeline chunks per stage",
}
_DIMS = ("tp", "cp", "dp", "pp")
#: Op names whose process group is known: the coordinates its members share. A name not
#: listed may be any group of the layout.
_KNOWN_GROUPS = {
    "tp-": [("cp", "dp", "pp")],
    "cp-": [("tp", "dp", "pp")],
    "sp-": [("tp", "dp", "pp")],
    "ep-": [("tp", "pp", "ep_block")],
    "grads-reduce-scatter": [("tp", "cp", "pp"), ("tp", "pp"), ("tp", "pp", "ep_i")],
    "params-all-gather": [("tp", "cp", "pp"), ("tp", "pp"), ("tp", "pp", "ep_i")],
}


@dataclass(frozen=True)
class Layout:
    """Sizes of a job's parallel groups.

    Attributes
    ----------
    dp, pp, tp, cp, sp, ep, vpp : int
        Group sizes (``cp`` ring context parallel, ``sp`` Ulysses sequence parallel; at most
        one of them above 1).
    source : str
        Where the layout came from (a meta file, or ``--layout``).
    schedule : str or None
        ``"1f1b"`` or ``"interleaved"`` when known.
    microbatches : int or None
        Microbatches per step when known.
    """

    dp: int = 1
    pp: int = 1
    tp: int = 1
    cp: int = 1
    sp: int = 1
    ep: int = 1
    vpp: int = 1
    source: str = "--layout"
    schedule: str | None = None
    microbatches: int | None = None

    def __post_init__(self):
        for key in LAYOUT_KEYS:
            v = getattr(self, key)
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{self.source}: layout {key} must be an integer >= 1, got {v!r}")
        if self.cp > 1 and self.sp > 1:
            raise ValueError(
                f"{self.source}: layout has cp={self.cp} and sp={self.sp}; ring context "
                "parallel and Ulysses sequence parallel share one slot, at most one may be > 1"
            )
        if (self.dp * self.cp_slot) % self.ep:
            raise ValueError(
                f"{self.source}: layout ep={self.ep} must divide dp * cp = {self.dp * self.cp_slot}"
            )

    @property
    def cp_slot(self) -> int:
        """Size of the context-parallel slot of the rank order (ring cp or Ulysses sp)."""
        return max(self.cp, self.sp)

    @property
    def world_size(self) -> int:
        """Number of ranks of the job."""
        return self.tp * self.cp_slot * self.dp * self.pp

    def coords(self, ranks) -> dict:
        """Coordinates ``tp, cp, dp, pp`` (and ``ep_block``, ``ep_i``) of global ranks."""
        r = np.asarray(ranks, dtype=np.int64)
        tp_i = r % self.tp
        cp_i = (r // self.tp) % self.cp_slot
        dp_i = (r // (self.tp * self.cp_slot)) % self.dp
        pp_i = r // (self.tp * self.cp_slot * self.dp)
        j = cp_i + self.cp_slot * dp_i
        return {
            "tp": tp_i,
            "cp": cp_i,
            "dp": dp_i,
            "pp": pp_i,
            "ep_block": j // self.ep,
            "ep_i": j % self.ep,
        }

    def describe(self) -> str:
        """``dp=..,pp=..,...`` with the sizes above 1 (and dp, pp always)."""
        keys = [k for k in LAYOUT_KEYS if k in ("dp", "pp") or getattr(self, k) > 1]
        return ",".join(f"{k}={getattr(self, k)}" for k in keys)

    def to_dict(self) -> dict:
        """JSON-ready sizes, source and world size."""
        out = asdict(self)
        out["world_size"] = self.world_size
        return out


def parse_layout(text: str, source: str = "--layout") -> Layout:
    """Parse ``dp=..,pp=..,tp=..,cp=..,sp=..,ep=..,vpp=..`` (missing keys are 1).

    Raises
    ------
    ValueError
        Unknown keys, repeated keys, values that are not integers >= 1.
    """
    values: dict = {}
    for item in str(text).split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, val = item.partition("=")
        key = key.strip().lower()
        if not sep or key not in LAYOUT_KEYS:
            raise ValueError(
                f"{source}: {item!r} is not KEY=N with KEY one of {', '.join(LAYOUT_KEYS)}"
            )
        if key in values:
            raise ValueError(f"{source}: {key} given twice")
        try:
            values[key] = int(val)
        except ValueError:
            raise ValueError(f"{source}: {key} must be an integer >= 1, got {val!r}") from None
    if not values:
        raise ValueError(f"{source}: empty layout; give e.g. dp=2,pp=4,tp=1")
    return Layout(**values, source=source)


def find_layout_meta(trace) -> Path | None:
    """``meta-<name>.yaml`` beside ``trace-<name>.<ext>`` (or ``<name>.<ext>``), if any."""
    path = Path(trace)
    if path.is_dir():
        return None
    stem = path.name.split(".")[0]
    names = [stem[len("trace-") :]] if stem.startswith("trace-") else []
    names.append(stem)
    for name in names:
        meta = path.parent / f"meta-{name}.yaml"
        if meta.is_file():
            return meta
    return None


def read_layout_meta(path) -> Layout:
    """Read a ``meta-<name>.yaml`` layout file.

    Raises
    ------
    ValueError
        Missing sizes, non-integer sizes, or a ``world_size`` that is not the product.
    """
    try:
        import yaml
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "reading meta-*.yaml layouts needs pyyaml: pip install 'prism_analytic[traces]'"
        ) from None

    path = Path(path)
    try:
        meta = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise ValueError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: expected a mapping of layout keys, got {type(meta).__name__}")
    keys = {
        "dp_size": "dp",
        "pp_size": "pp",
        "tp_size": "tp",
        "cp_size": "cp",
        "dsp_size": "sp",
        "ep_size": "ep",
        "vpp_size": "vpp",
    }
    if "dp_size" not in meta or "pp_size" not in meta:
        raise ValueError(f"{path}: layout meta needs dp_size and pp_size (has {sorted(meta)})")
    values = {}
    for src, dst in keys.items():
        v = meta.get(src, 1)
        v = 1 if v is None else v
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"{path}: {src} must be an integer >= 1, got {v!r}")
        values[dst] = v
    schedule = meta.get("schedule")
    if schedule is not None and schedule not in ("1f1b", "interleaved"):
        raise ValueError(f"{path}: schedule must be '1f1b' or 'interleaved', got {schedule!r}")
    layout = Layout(
        **values, source=str(path), schedule=schedule, microbatches=meta.get("microbatches")
    )
    world = meta.get("world_size")
    if world is not None and world != layout.world_size:
        raise ValueError(
            f"{path}: world_size {world} is not tp*cp*dp*pp = {layout.world_size} "
            f"({layout.describe()})"
        )
    return layout


def check_layout(layout: Layout, structure) -> list[str]:
    """Contradictions between a layout and a recovered structure (empty when none).

    Parameters
    ----------
    layout : Layout
        The job's layout.
    structure : StepStructure
        From :func:`~prism_analytic.traces.structure.recover_structure` (its ``groups``).

    Returns
    -------
    list of str
        One line per contradiction kind, the first example named.
    """
    out = []
    ranks = np.asarray(structure.ranks)
    recorded = np.unique(ranks)
    if recorded.max() >= layout.world_size:
        out.append(
            f"rank {int(recorded.max())} recorded but the layout has {layout.world_size} ranks"
        )
        return out
    c = layout.coords(ranks)
    for col, dim in (("dp", "dp"), ("stage", "pp")):
        known = np.asarray(getattr(structure, col)) >= 0
        bad = known & (np.asarray(getattr(structure, col)) != c[dim])
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            out.append(
                f"rank {int(ranks[i])} is recorded with {'dp_rank' if col == 'dp' else 'stage'} "
                f"{int(getattr(structure, col)[i])}, the layout puts it at {dim} "
                f"{int(c[dim][i])} ({int(bad.sum())} ops disagree)"
            )
    chunk = getattr(structure, "chunk", None)
    if chunk is not None and (np.asarray(chunk) >= 0).any():
        chunks = int(np.max(chunk)) + 1
        if chunks > layout.vpp:
            out.append(
                f"ops are recorded with model chunk {chunks - 1} (column mc), the layout has "
                f"vpp={layout.vpp} chunk(s) per stage"
            )
    rc = layout.coords(recorded)
    by_rank = {int(r): k for k, r in enumerate(recorded)}
    seen: dict = {}
    bad_groups: dict = {}
    for g in structure.groups:
        members = tuple(sorted({int(ranks[i]) for i in g}))
        name = str(structure.names[g[0]])
        kind = "p2p" if len(g) == 2 and _p2p(structure.names, g) else "collective"
        key = (members, kind)
        key = (members, kind, _known(name))
        if key not in seen:
            idx = np.array([by_rank[r] for r in members])
            if kind == "p2p":
                seen[key] = _fits_p2p(layout, rc, idx)
            else:
                seen[key] = _fits_group(layout, rc, idx, _KNOWN_GROUPS.get(_known(name)))
        if not seen[key]:
            bad_groups.setdefault(name, []).append(members)
    for name, groups in sorted(bad_groups.items()):
        known = _known(name)
        if name.endswith(("-send", "-recv")):
            what = "pipeline or ring neighbours"
        elif known is not None:
            what = (
                f"a {known.rstrip('-')} group ("
                + " or ".join("same " + "/".join(f) for f in _KNOWN_GROUPS[known])
                + ")"
            )
        else:
            what = "a tp/cp/dp/pp/ep group"
        out.append(
            f"{name}: ranks {list(groups[0])} are not {what} of the layout"
            + (f" ({len(groups) - 1} more such units)" if len(groups) > 1 else "")
        )
    return out


def _known(name: str) -> str | None:
    for k in _KNOWN_GROUPS:
        if name == k or (k.endswith("-") and name.startswith(k)):
            return k
    return None


def _p2p(names, g) -> bool:
    a, b = (str(names[i]) for i in g)
    return {a.rsplit("-", 1)[-1], b.rsplit("-", 1)[-1]} == {"send", "recv"}


def _fits_p2p(layout: Layout, rc: dict, idx) -> bool:
    """Two ranks one pipeline stage apart (same tp, cp, dp), or cp-ring neighbours."""
    a, b = idx
    differ = [d for d in _DIMS if rc[d][a] != rc[d][b]]
    if differ == ["pp"]:
        return (rc["pp"][a] - rc["pp"][b]) % layout.pp in (1, layout.pp - 1)
    if differ == ["cp"]:
        return (rc["cp"][a] - rc["cp"][b]) % layout.cp_slot in (1, layout.cp_slot - 1)
    return False


def _fits_group(layout: Layout, rc: dict, idx, known=None) -> bool:
    """Members are the recorded ranks of one process group of the layout.

    ``known``: the coordinate sets one of which the members must share (a named group);
    None: any group of the layout.
    """
    n = len(rc["tp"])
    member = np.zeros(n, bool)
    member[idx] = True
    if known is not None:
        for fix in known:
            same = np.ones(n, bool)
            for d in fix:
                same &= rc[d] == rc[d][idx[0]]
            if np.array_equal(same, member):
                return True
        return False
    vary = [d for d in _DIMS if len(np.unique(rc[d][idx])) > 1]
    fixed = [d for d in _DIMS if d not in vary]
    candidates = [fixed]
    # a group may fix more dimensions than its members show vary only when it is a subset
    candidates += [list(f) for k in range(len(fixed)) for f in combinations(fixed, k)]
    for fix in candidates:
        same = np.ones(n, bool)
        for d in fix:
            same &= rc[d] == rc[d][idx[0]]
        if same[idx].all() and np.array_equal(same, member):
            return True
    if vary == ["pp"]:  # embedding / position-embedding groups: some stages of a pipeline
        return True
    for fix in (("tp", "pp", "ep_block"), ("tp", "pp", "ep_i")):  # expert, expert-data groups
        same = np.ones(n, bool)
        for d in fix:
            same &= rc[d] == rc[d][idx[0]]
        if np.array_equal(same, member):
            return True
    return False
