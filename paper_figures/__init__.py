"""One script per PRISM figure; `prism figures` regenerates them (see the roadmap)."""
