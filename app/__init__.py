"""sparsescope's web layer and command line (FastAPI app, settings, services, CLI)."""
