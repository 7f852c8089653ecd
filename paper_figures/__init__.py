"""One script per PRISM figure; `prism figures` regenerates them all (prism_analytic/figures)."""
