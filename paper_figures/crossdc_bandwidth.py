"""Cross-datacenter: p95 vs bandwidth and jitter.

Usage: ``python paper_figures/crossdc_bandwidth.py [OUT_DIR]`` (default
``paper_figures/out``); the figure maker lives in :mod:`prism_analytic.figures`
(``prism figures --only crossdc_bandwidth`` does the same).
"""

import json
import sys

from prism_analytic.figures import maker


def main() -> None:
    out = sys.argv[1] if len(sys.argv) > 1 else "paper_figures/out"
    print(json.dumps(maker("crossdc_bandwidth")(out), indent=2, default=str))


if __name__ == "__main__":
    main()
