"""Agreement suite: the analytic engine against Monte Carlo on named step-graph scenarios.

The suite lives in the package (:mod:`prism_analytic.validation`); this script is the same as
``prism agreement``::

    python validation/agreement.py [--samples N] [--seed S] [--only NAME ...] [--json]
    python validation/agreement.py --timing [--json] | --list
    python validation/agreement.py --tolerance 0.001  # relative error accepted per quantile
"""

import sys

from prism_analytic.cli.agreement import main

if __name__ == "__main__":
    sys.exit(main())
