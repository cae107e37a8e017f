"""Flags that several commands take, each declared once here with its one default and help.

A command calls ``add_<flag>(parser)`` for each shared flag it takes and the matching check
(``alpha_of(args)``, ``check_max_tokens(args, model)`` ...) in its ``run``; its own flags
(``--layer``, ``--workers`` ...) stay in its module. Where one flag must default differently in
two commands, the helper takes the default as an argument and the help says why; where a
flag means the same in several commands but each has its own value, it defaults to None and
each command reads None as its own (its help says which):

==================  ================================  =========================================
flag                commands                          default
==================  ================================  =========================================
``--model``         all                               the shipped adapted all-MiniLM-L6-v2
                                                      (serve: repeatable, SPARSESCOPE_MODELS,
                                                      else it and the original; heads:
                                                      repeatable, it and the original; card:
                                                      repeatable, required)
``--alpha``         analyze, fit, pareto, clusters,   1.5 (``request.DEFAULT_ALPHA``; heads:
                    heads                             repeatable, one per --model)
``--artefact``      serve, analyze, pareto, clusters  the one fitted for the model at --alpha
``--device``        serve, analyze, fit, clusters     auto (serve: SPARSESCOPE_DEVICE first)
``--max-tokens``    serve, analyze, fit, pareto,      512 (``settings.DEFAULT_MAX_TOKENS``;
                    clusters                          serve: SPARSESCOPE_MAX_TOKENS first;
                                                      up to the model's positions)
``--corpus``        fit, pareto, clusters, adapt,     required (adapt, heads: one file, no
                    heads                             --format)
``--format``        fit, pareto, clusters             auto (detected per file)
``--limit``         fit, pareto, clusters, heads      all inputs; clusters 50 (see its help)
``--causal``        analyze, pareto                   off
``--json``          analyze, clusters                 off (a table)
``--block``         analyze, pareto                   64 (``pareto.points.DEFAULT_BLOCK``)
``--engine``        fit, pareto, adapt                local
``--seed``          fit, adapt                        0
``--workers``       pareto, adapt                     pareto: by the inputs; adapt: 2 Ray workers
``--threads``       pareto, adapt, card               None: pareto 1 per process, card torch's;
                                                      adapt: 0, torch's
``--method``        analyze, fit                      None: analyze every method, fit
                                                      sparsefinder
``--lr``            fit, adapt                        None: fit 1e-3, adapt 1e-4
``--batch``         adapt, card                       None: adapt 16 sequences, card 64 sentences
``--eval-every``    adapt, card                       5
``--sts``           pareto, card                      none (card: required)
``--alpha`` (adapt) adapt                             None: 1.5 to train, the model's own with
                                                      --evaluate; also 'learned' / 'own'
                                                      (``add_alpha(words=...)``)
``--out``           fit, pareto, adapt, card          fit: ``.``; pareto: ``pareto-out``;
                                                      adapt: none; card: the shipped cards
                                                      (see their help)
==================  ================================  =========================================

``serve``'s flags default to None so that the ``SPARSESCOPE_*`` environment (app/engine/
settings.py) applies when a flag is not given; the settings carry the same defaults.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from sparse_core.errors import SparsescopeError
from sparse_core.metrics import BLOCKS
from sparse_core.pareto.points import DEFAULT_BLOCK

from ..engine.request import DEFAULT_ALPHA, check_alpha
from ..engine.settings import DEFAULT_MAX_TOKENS

#: What ``--model`` accepts, said once for every command.
MODEL_HELP = (
    "a local Hugging Face directory or a name in the local Hugging Face cache (never "
    "downloaded; default: the shipped sparsescope/all-MiniLM-L6-v2-entmax1.5, all-MiniLM-L6-v2 "
    "adapted to 1.5-entmax; the original is sentence-transformers/all-MiniLM-L6-v2)"
)
#: Corpus formats (``sparse_core.corpus.read_corpus``).
FORMATS = ("auto", "conllu", "wikitext", "plain")
#: Where the model runs when no --device is given.
DEFAULT_DEVICE = "auto"
#: The shortest input a corpus command packs.
MIN_MAX_TOKENS = 8


def add_model(
    p: argparse.ArgumentParser,
    *,
    several: bool = False,
    required: bool = False,
    what: str | None = None,
) -> None:
    """``--model NAME_OR_DIR`` (``several``: repeatable; ``what``: what the models are for and
    what the default is, said before :data:`MODEL_HELP`)."""
    if what is None and several:
        what = "a model to serve, repeatable (the first is the default): "
    p.add_argument(
        "--model",
        action="append" if several else "store",
        default=None,
        required=required,
        metavar="NAME_OR_DIR",
        help=(what or "") + MODEL_HELP,
    )


class _AppendFresh(argparse.Action):
    """``append``, but the default (a single value) is replaced by the first value given, so the
    command tells "not given" (a plain value) from "given" (a list)."""

    def __call__(self, parser, namespace, values, option_string=None):
        got = getattr(namespace, self.dest, None)
        setattr(namespace, self.dest, [*got, values] if isinstance(got, list) else [values])


def add_alpha(
    p: argparse.ArgumentParser,
    *,
    words: tuple[str, ...] = (),
    default: float | None = DEFAULT_ALPHA,
    help: str | None = None,
    several: bool = False,
) -> None:
    """``--alpha A``: entmax's alpha, checked by :func:`alpha_of`.

    ``words``: names accepted besides a number (adapt: ``learned``, ``own``); the value is then
    kept as typed (a string, or ``default``) and the command reads it itself; ``help`` says
    what the words mean and why the default differs. ``several`` (heads): repeatable, one per
    model; the value is the default (a float) when not given, else the list given."""
    p.add_argument(
        "--alpha",
        **({"action": _AppendFresh} if several else {}),
        type=str if words else float,
        default=default,
        metavar="A|" + "|".join(words) if words else None,
        help=help or f"entmax alpha in [1, 2] (default {DEFAULT_ALPHA:g})",
    )


def alpha_of(args: argparse.Namespace) -> float:
    """``--alpha`` checked (``engine.request.check_alpha``: the app's one range and message),
    before any model is loaded."""
    return check_alpha(args.alpha)


def add_artefact(p: argparse.ArgumentParser) -> None:
    """``--artefact PATH``: a Sparsefinder artefact."""
    p.add_argument(
        "--artefact",
        default=None,
        metavar="PATH",
        help="a Sparsefinder artefact (its .safetensors, .json or base name; default: one "
        "fitted for the model at the alpha used, if any: the shipped one for the default model "
        "at 1.5)",
    )


def add_device(p: argparse.ArgumentParser, *, setting: bool = False) -> None:
    """``--device auto|cpu|cuda[:N]`` (checked where the model loads). ``setting``: default
    None, so that ``SPARSESCOPE_DEVICE`` applies (serve)."""
    p.add_argument(
        "--device",
        default=None if setting else DEFAULT_DEVICE,
        metavar="DEVICE",
        help="auto, cpu or cuda where the model runs (default: "
        + ("SPARSESCOPE_DEVICE, else " if setting else "")
        + f"{DEFAULT_DEVICE})",
    )


def add_max_tokens(
    p: argparse.ArgumentParser, *, setting: bool = False, text: bool = False
) -> None:
    """``--max-tokens N``: a corpus command's tokens per packed input (specials included),
    (``text``: analyze) the token limit of the text, or (``setting``: serve) each served
    model's token limit, default None so that ``SPARSESCOPE_MAX_TOKENS`` applies. One default
    each way; every one goes up to the model's own positions (long texts are recorded sparse,
    sparse_core.sparse_probs)."""
    if text:
        p.add_argument(
            "--max-tokens", type=int, default=None, metavar="N",
            help=f"token limit of the text, specials included (default {DEFAULT_MAX_TOKENS} or "
            "the model's positions if fewer; at most the model's positions); a longer text is "
            "refused, or cut with --truncate",
        )  # fmt: skip
    elif setting:
        p.add_argument(
            "--max-tokens", type=int, default=None, metavar="N",
            help="token limit per text, capped by each model's positions (default: "
            f"SPARSESCOPE_MAX_TOKENS, else {DEFAULT_MAX_TOKENS}); a longer text is analysed in "
            "windows of that many tokens",
        )  # fmt: skip
    else:
        p.add_argument(
            "--max-tokens", type=int, default=None, metavar="N",
            help=f"tokens per input, specials included (default {DEFAULT_MAX_TOKENS} or the "
            "model's positions if fewer; at most the model's positions)",
        )  # fmt: skip


def check_max_tokens(args: argparse.Namespace, model: Any) -> int:
    """A command's ``--max-tokens`` within [8, the model's positions] (the model loaded with
    ``max_tokens=args.max_tokens``: :func:`load_for`)."""
    most = getattr(model, "model_positions", None) or model.config.max_positions
    if args.max_tokens is None:  # not given: the default, or the model's positions if fewer
        args.max_tokens = min(DEFAULT_MAX_TOKENS, most)
    if not MIN_MAX_TOKENS <= args.max_tokens <= most:
        raise SparsescopeError(
            f"--max-tokens must be in [{MIN_MAX_TOKENS}, {most}] (the model's positions), "
            f"got {args.max_tokens}"
        )
    return args.max_tokens


def add_corpus(
    p: argparse.ArgumentParser,
    *,
    several: bool = True,
    what: str = "",
    formats: bool = True,
    required: bool = True,
    metavar: str = "PATH",
) -> None:
    """``--corpus PATH [PATH ...]`` (``required`` unless the command checks it itself;
    ``several``: one or more files, read in order) and ``--format`` (``formats=False``: none, the
    command reads its file its own way)."""
    p.add_argument(
        "--corpus",
        nargs="+" if several else None,
        required=required,
        metavar=metavar,
        help=("corpus files, read in order" if several else "a corpus file") + what,
    )
    if not formats:
        return
    p.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="corpus format (default: detected per file)",
    )


def add_limit(
    p: argparse.ArgumentParser,
    *,
    default: int | None = None,
    why: str = "",
    unit: str = "packed inputs",
) -> None:
    """``--limit N``: only the first N packed inputs (``unit``: heads, sentences; corpus order;
    the rest stays unseen)."""
    p.add_argument(
        "--limit",
        type=int,
        default=default,
        metavar="N",
        help=f"use only the first N {unit} (corpus order; later text stays unseen; "
        + (f"default {default}: {why})" if default is not None else "default: all)"),
    )


def check_limit(args: argparse.Namespace) -> None:
    if args.limit is not None and args.limit < 1:
        raise SparsescopeError(f"--limit must be >= 1, got {args.limit}")


def add_causal(p: argparse.ArgumentParser) -> None:
    p.add_argument("--causal", action="store_true", help="mask future keys (decoder-style)")


def add_json(p: argparse.ArgumentParser, extra: str = "") -> None:
    """``--json``; ``extra`` says what the JSON carries beyond the table."""
    p.add_argument(
        "--json", action="store_true",
        help="print JSON instead of a table" + (f" ({extra})" if extra else ""),
    )  # fmt: skip


def add_block(p: argparse.ArgumentParser, *, axis: bool = False) -> None:
    """``--block B``: the tile size of the block sparsity. ``axis`` (pareto): the x-axis with
    ``--x block``; its default is then None (read as 64) so that a ``--block`` given without
    ``--x block`` is caught."""
    sizes = ", ".join(map(str, BLOCKS))
    p.add_argument(
        "--block",
        type=int,
        default=None if axis else DEFAULT_BLOCK,
        choices=None if axis else BLOCKS,
        metavar="B",
        help=f"tile size ({sizes}; default {DEFAULT_BLOCK}) "
        + (
            "of the block sparsity axis of --x block"
            if axis
            else "of the table's block sparsity column (the JSON carries every size)"
        ),
    )


def add_seed(p: argparse.ArgumentParser) -> None:
    """``--seed S``: the random seed of a command's draws."""
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")


def add_workers(p: argparse.ArgumentParser, *, default: int | None, help: str) -> None:
    """``--workers N``: processes or Ray workers (``help`` says what they are and the default)."""
    p.add_argument("--workers", type=int, default=default, metavar="N", help=help)


def add_threads(p: argparse.ArgumentParser, *, default: int | None, help: str) -> None:
    """``--threads T``: torch CPU threads (``help`` says whose and the default)."""
    p.add_argument("--threads", type=int, default=default, metavar="T", help=help)


def add_engine(p: argparse.ArgumentParser, *, what: str) -> None:
    """``--engine local|ray`` (``what``: what runs where)."""
    p.add_argument(
        "--engine",
        default="local",
        choices=("local", "ray"),
        help=f"{what}; ray: on the Ray cluster at RAY_ADDRESS, else a local one (needs pip "
        "install 'sparsescope[ray]'; docs/ray.md)",
    )


def add_out(p: argparse.ArgumentParser, *, default: str | None, why: str) -> None:
    """``--out DIR``: the output folder (``default`` per command: ``why`` says why)."""
    p.add_argument("--out", default=default, metavar="DIR", help=f"output directory ({why})")


def add_method(
    p: argparse.ArgumentParser, *, choices: tuple[str, ...], several: bool = False, help: str
) -> None:
    """``--method NAME``: analyze (``several``: repeatable, default all) or fit (one of its
    kinds; default None, read as its first kind). ``help`` says which and the default."""
    p.add_argument(
        "--method",
        action="append" if several else "store",
        choices=list(choices),
        default=None,
        metavar="NAME" if several else None,
        help=help,
    )


def add_lr(p: argparse.ArgumentParser, *, help: str) -> None:
    """``--lr R``: a learning rate; default None, read as the command's own (fit 1e-3, adapt
    1e-4; ``help`` says it)."""
    p.add_argument("--lr", type=float, default=None, help=help)


def add_batch(p: argparse.ArgumentParser, *, help: str) -> None:
    """``--batch B``: items per forward or step; default None, read as the command's own
    (adapt 16 sequences, card 64 sentences; ``help`` says it)."""
    p.add_argument("--batch", type=int, default=None, metavar="B", help=help)


def add_eval_every(p: argparse.ArgumentParser, *, help: str) -> None:
    """``--eval-every K``: every K-th article of a corpus is held out (adapt, card: the same
    split, so a card's held-out articles are those adapt did not train on)."""
    p.add_argument("--eval-every", type=int, default=5, metavar="K", help=help)


def add_sts(p: argparse.ArgumentParser, *, required: bool = False, what: str = "") -> None:
    """``--sts FILE [FILE ...]``: STS sets (``sparse_core.card.read_sts``)."""
    p.add_argument(
        "--sts",
        nargs="+",
        default=None,
        required=required,
        metavar="FILE",
        help="STS files (score<TAB>sentence A<TAB>sentence B, or SICK's tsv with its header)"
        + what,
    )


def check_out(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise SparsescopeError(f"--out must be a directory, but {str(out)!r} is a file")
    return out


def load_for(args: argparse.Namespace, device: str | None = None) -> Any:
    """``load_model(args.model, device, max_tokens=args.max_tokens)``, then the flag's check
    against the model's own positions (a cap above them would otherwise shrink silently)."""
    from sparse_core import load_model

    given = DEFAULT_MAX_TOKENS if args.max_tokens is None else int(args.max_tokens)
    low = max(given, MIN_MAX_TOKENS)  # below: refused by the check after
    model = load_model(args.model, device=device or args.device, max_tokens=low)
    check_max_tokens(args, model)
    return model
