"""Sub-commands of the ``sparsescope`` CLI: one module each, exposing add_parser() and run()."""

from __future__ import annotations

import argparse

#: What ``--model`` accepts, said once for every command.
MODEL_HELP = (
    "a local Hugging Face directory or a name in the local Hugging Face cache (never "
    "downloaded; default: the shipped sparsescope/all-MiniLM-L6-v2-entmax1.5, all-MiniLM-L6-v2 "
    "adapted to 1.5-entmax; the original is sentence-transformers/all-MiniLM-L6-v2)"
)


def add_model_argument(p: argparse.ArgumentParser, *, several: bool = False) -> None:
    """``--model NAME_OR_DIR`` (``several``: repeatable, the first is the default)."""
    p.add_argument(
        "--model",
        action="append" if several else "store",
        default=None,
        metavar="NAME_OR_DIR",
        help=("a model to serve, repeatable (the first is the default): " if several else "")
        + MODEL_HELP,
    )
