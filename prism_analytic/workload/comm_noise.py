"""The noise of one communication instance, exactly as the step builder draws it.

One place for readers outside the builder (sensitivity perturbations, figures, validation
scripts) to get the law :func:`~.builder.build_step_graph` uses for a communication op: its
tier's noise multiplier (``variability.network``) *and* ``variability.scale``'s per-node
collective event for the job's size (:func:`~.scale_variability.scale_events`), applied per
instance before overlap (``max(0, seconds * M - hidden)``). Readers that took the network
tier alone showed, once ``variability.scale`` was switched on, a different law from the one
``prism predict`` evaluates.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..distributions import Distribution
from .builder import comm_law
from .config import JobConfig, TierNoise, VariabilityConfig
from .mean_model import OpMean
from .scale_variability import COLLECTIVE_EVENT_TIER, ScaleEvents, collective_event, scale_events

__all__ = ["CommNoise", "collective_multiplier"]


@dataclass(frozen=True)
class CommNoise:
    """A job's communication noise: tiers plus ``variability.scale``'s collective events.

    Build it with :meth:`of` (which evaluates the job's scale events once).

    Attributes
    ----------
    job : JobConfig
    events : ScaleEvents
        The job's :func:`~.scale_variability.scale_events`.
    """

    job: JobConfig
    events: ScaleEvents

    @classmethod
    def of(cls, job: JobConfig) -> CommNoise:
        """The communication noise of ``job`` (its scale events evaluated once)."""
        if not isinstance(job, JobConfig):
            raise TypeError(f"job must be a JobConfig, got {type(job).__name__}")
        return cls(job, scale_events(job))

    def tier(self, name: str | None) -> TierNoise:
        """The tier named ``name`` (None or unknown: intra-node, as the builder reads it)."""
        net = self.job.variability.network
        tiers = {"intra_node": net.intra_node, "inter_node": net.inter_node}
        return {**tiers, "cross_dc": net.cross_dc}.get(name or "intra_node", net.intra_node)

    def tier_events(self, name: str | None) -> tuple[tuple[float, float], ...]:
        """``variability.scale``'s independent ``(probability, factor)`` events on the tier."""
        return self.events.tier_events(name)

    def multiplier(self, name: str | None) -> Distribution:
        """The noise multiplier of one instance on the tier (mean-one body, tails, events)."""
        return comm_law(1.0, self.tier(name), 0.0, self.tier_events(name))

    def instance(self, op: OpMean) -> Distribution:
        """One execution's exposed time of communication op ``op``.

        ``max(0, seconds * M - hidden_s)`` where the op overlaps compute (noise before
        overlap), else ``exposed_s * M``: the law whose moments the builder sums.
        """
        if op.kind == "compute":
            raise ValueError(f"op {op.name!r} is compute; only communication has a tier noise")
        tier, events = self.tier(op.tier), self.tier_events(op.tier)
        if op.hidden_s is not None and op.hidden_s > 0 and op.seconds > 0:
            return comm_law(op.seconds, tier, op.hidden_s, events)
        return comm_law(op.exposed_s, tier, 0.0, events)


def collective_multiplier(
    variability: VariabilityConfig, nodes: int, extent_nodes: int | None = None
) -> Distribution:
    """The inter-node noise multiplier of one collective over ``nodes`` nodes.

    The inter-node tier's law plus ``variability.scale``'s per-node event for that many
    nodes (:func:`~.scale_variability.collective_event`), for a collective on its own
    (without a job around it).

    Parameters
    ----------
    variability : VariabilityConfig
    nodes : int
        Nodes the collective spans (>= 1).
    extent_nodes : int, optional
        Nodes between its first and last member (default ``nodes``: compact placement).
    """
    if not isinstance(variability, VariabilityConfig):
        raise TypeError(f"variability must be a VariabilityConfig, got {type(variability)}")
    if int(nodes) != nodes or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    tier = getattr(variability.network, COLLECTIVE_EVENT_TIER)  # where the event strikes
    events: tuple[tuple[float, float], ...] = ()
    if variability.scale.node_tail_prob > 0:
        p, f = collective_event(variability.scale, tier.tail_factor, int(nodes), extent_nodes)
        events = ((p, f),) if p > 0 and f > 1 else ()
    return comm_law(1.0, tier, 0.0, events)
