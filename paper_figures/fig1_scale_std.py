"""Fig. 1 analogue: compute and communication time at 16k vs 64k GPUs.

Usage: ``python paper_figures/fig1_scale_std.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only fig1_scale_std`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("fig1_scale_std")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
