"""The numerical grid policy: one object, passed in and recorded in every gridded result."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ._checks import check_count, check_positive

__all__ = ["GridPolicy", "DEFAULT_POLICY"]


@dataclass(frozen=True)
class GridPolicy:
    """How finely distributions are discretised.

    Parameters
    ----------
    rel_width : float
        Target width of the numerical quantile bracket relative to the result's scale
        (its mean, or its standard deviation when the mean is near zero). Each operand of a
        sum of ``k`` terms is discretised with spacing ``rel_width * scale / k``, because every
        discretised operand widens the rounding sandwich by one cell.
    max_cells : int
        Hard cap on the length of any grid. A longer result is re-binned onto a coarser
        lattice (which widens the bracket, honestly reported) instead of exhausting memory.
    tail_mass : float
        Probability trimmed from each tail into explicit atoms (at -inf for the lower
        variable, +inf for the upper one). Quantiles inside that mass return infinite bounds.
    fold_roundoff : bool
        Floating-point round-off of every FFT convolution is bounded rigorously (an L1 bound,
        i.e. a CDF error at every point; see ``centred_sum.fft_l1_error``). With ``True`` the
        bound is folded into the brackets (mass moved to the tail atoms), so brackets hold
        against round-off too; the worst-case bound (~1e-12 per convolution, multiplied by the
        copies of a sum and by ``n`` in a maximum) then leaves extreme levels unresolved. With
        ``False`` (default) the bound is reported in ``GridDistribution.roundoff`` instead:
        brackets are guaranteed for a law whose CDF is within ``roundoff`` of the exact one.
    op_refine : int
        Analytic engine: the ops of a graph that also holds a pipeline or replica-group grid
        of spacing ``H`` are discretised at ``H / (op_refine * k)`` (``k`` ops on the deepest
        path), so their roundings add at most ``1 / op_refine`` of a cell of ``H`` to the
        bracket. Default 4. A smaller value is faster and still guaranteed, with brackets up
        to a cell wider (opt-in): llama3-405b at 65,536 GPUs, 1 instead of 4: warm prediction
        70 -> 15 ms CPU, cold 245 -> 181 ms (load 6.9), brackets 1.63 -> 2.03 ms at 4 of 8
        levels, quantiles moved <= 0.02 ms; on every graph of ``validation/bench_resolution.py``
        the quantiles stay inside the default's brackets, which widen by at most 1.25x
        (``validation/results/bench_resolution.md``).
    """

    rel_width: float = 2.5e-4
    max_cells: int = 2**18
    tail_mass: float = 1e-15
    fold_roundoff: bool = False
    op_refine: int = 4

    def __post_init__(self) -> None:
        check_positive(self.rel_width, "rel_width")
        if self.rel_width >= 1:
            raise ValueError(f"rel_width must be < 1, got {self.rel_width}")
        check_count(self.max_cells, "max_cells", minimum=16)
        check_positive(self.tail_mass, "tail_mass")
        if self.tail_mass >= 1e-3:
            raise ValueError(f"tail_mass must be < 1e-3, got {self.tail_mass}")
        if self.max_cells > 2**26:  # 512 MiB a side: a larger lattice is a mistake, not a need
            raise ValueError(f"max_cells must be <= 2**26 = {2**26}, got {self.max_cells}")
        if not isinstance(self.fold_roundoff, bool):
            raise TypeError(f"fold_roundoff must be True or False, got {self.fold_roundoff!r}")
        check_count(self.op_refine, "op_refine", minimum=1)

    def to_dict(self) -> dict:
        """Plain-dict form, for results and JSON."""
        return asdict(self)


DEFAULT_POLICY = GridPolicy()
