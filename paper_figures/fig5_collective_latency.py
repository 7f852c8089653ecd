"""Fig. 5 analogue: collective latency by size and node count.

Usage: ``python paper_figures/fig5_collective_latency.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only fig5_collective_latency`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("fig5_collective_latency")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
