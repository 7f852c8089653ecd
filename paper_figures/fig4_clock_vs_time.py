"""Fig. 4 analogue: SM clock vs kernel time (gpu_variability).

Usage: ``python paper_figures/fig4_clock_vs_time.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only fig4_clock_vs_time`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("fig4_clock_vs_time")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
