"""Predicted vs measured step-time CDFs on the real traces.

Usage: ``python paper_figures/traces_predicted_vs_measured.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only traces_predicted_vs_measured`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("traces_predicted_vs_measured")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
