"""``python -m prism_analytic`` runs the ``prism`` command."""

from .cli import main

raise SystemExit(main())
