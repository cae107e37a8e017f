"""Sub-commands of the ``sparsescope`` CLI: one module each, exposing add_parser() and run()."""
