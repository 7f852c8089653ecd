"""Probability of slow-down vs scale.

Usage: ``python paper_figures/slowdown_vs_scale.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only slowdown_vs_scale`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("slowdown_vs_scale")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
