"""Fig. 3 analogue: spatial vs temporal variability (gpu_variability).

Usage: ``python paper_figures/fig3_spatial_temporal.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only fig3_spatial_temporal`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("fig3_spatial_temporal")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
