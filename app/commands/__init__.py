"""Sub-commands of the ``sparsescope`` CLI: one module each, exposing add_parser() and run().

Flags that several commands take (``--model``, ``--alpha``, ``--artefact``, ``--device``,
``--max-tokens``, ``--corpus`` ...) are declared once, in :mod:`sparsescope.commands.common`.
The commands use the engine (:mod:`sparsescope.engine`) and ``sparse_core``; ``serve`` also
starts the web app (:mod:`sparsescope.web`).
"""
