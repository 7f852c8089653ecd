"""Extreme-value (Gumbel) convergence of the max of n ranks.

Usage: ``python paper_figures/evt_convergence.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only evt_convergence`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("evt_convergence")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
