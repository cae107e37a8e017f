"""The ``sparsescope`` command line. With no sub-command it runs ``serve``.

Each sub-command lives in ``app/commands/<name>.py`` and exposes ``add_parser(subparsers)``
and ``run(args) -> int``. User mistakes (bad text, bad parameters, missing files) are reported
on stderr in one line with a non-zero exit, never as a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

COMMANDS = ("serve", "analyze", "fit", "pareto", "clusters", "heads", "adapt", "card")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sparsescope",
        description="See, teach and measure sparse (alpha-entmax) attention.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        # imported here, not at the top: after main() has put the Hugging Face libraries offline
        importlib.import_module(f"sparsescope.commands.{name}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv or (argv[0].startswith("-") and argv[0] not in ("-h", "--help", "-v", "--verbose")):
        argv = ["serve", *argv]
    elif argv in (["-v"], ["--verbose"]):
        argv = [*argv, "serve"]
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if args.command is None:
        parser.print_help()
        return 2
    from sparse_core.errors import SparsescopeError

    try:
        return int(args.run(args) or 0)
    except SparsescopeError as exc:
        print(f"sparsescope {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"sparsescope {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
