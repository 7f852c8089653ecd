"""Analytic vs Monte Carlo: accuracy and speed.

Usage: ``python paper_figures/analytic_vs_montecarlo.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only analytic_vs_montecarlo`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("analytic_vs_montecarlo")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
