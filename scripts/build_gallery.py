"""Build the example gallery, ``static/gallery/examples.json``, by measuring the real model.

Every example is a text plus a view of the page (a ShareState: α, causal, layer, head, method,
parameters, locked row ...). The head of each example is *picked by measurement* on the real
entmax model (all-MiniLM-L6-v2 at α = 1.5 unless stated), never guessed, and the figures that
justify the choice are stored with the example, so the gallery can say why it shows that head::

    python scripts/build_gallery.py                       # writes static/gallery/examples.json
    python scripts/build_gallery.py --artefact fitted/    # another Sparsefinder artefact
    python scripts/build_gallery.py --check               # rebuild and compare, write nothing

The Wikipedia passage is read from WikiText-2 (``--wikitext``, default
``../shared/data/wikitext-2/valid.txt``) and *copied* into the JSON: the product never reads the
corpus at run time. Examples that need a Sparsefinder artefact (POS clusters, a learned pattern
that misses edges) use the shipped one (or ``--artefact``); without any, the POS example falls
back to a head picked from the attention itself and the learned-pattern example is left out.
The picks live in scripts/gallery/ (one module per kind of example); tests/app/
test_gallery_figures.py re-measures them on the real model.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scripts.gallery.blocks import block_miss  # noqa: E402
from scripts.gallery.heads import alpha_pair, code_snippet, coreference, lecture_causal  # noqa: E402
from scripts.gallery.learned import learned_miss, pos_clusters  # noqa: E402
from scripts.gallery.measure import Example  # noqa: E402
from scripts.gallery.patterns import periodic, wikipedia  # noqa: E402
from scripts.gallery.texts import wiki_passage  # noqa: E402
from sparse_core import load_model  # noqa: E402
from sparse_core.errors import ArtefactError  # noqa: E402
from sparse_core.sparsefinder import artefact_name, load_artefact  # noqa: E402

log = logging.getLogger("build_gallery")

OUT = ROOT / "static" / "gallery" / "examples.json"
WIKITEXT = ROOT.parent / "shared" / "data" / "wikitext-2" / "valid.txt"
FORMAT_VERSION = 1


def load_artefact_for(model, path: str | None):
    """The artefact at ``path`` (None: the shipped one for this model at α = 1.5, or None when
    there is none)."""
    try:
        art = load_artefact(path, model_id=model.model_id, alpha=1.5)
    except (ArtefactError, OSError) as exc:
        if path is not None:
            raise
        log.warning("no shipped Sparsefinder artefact (%s): learned-pattern examples left out", exc)
        return None
    cfg = model.config
    art.check_model(cfg.num_layers, cfg.num_heads, cfg.head_dim)
    return art


def build(model, artefact, wiki_text: str) -> dict:
    """The gallery file's content: every example measured on ``model`` (``wiki_text``: the
    Wikipedia passage, ``texts.wiki_passage`` of the corpus)."""
    steps: list[Callable[[], Example | list[Example]]] = [
        lambda: lecture_causal(model),
        lambda: coreference(model),
        lambda: alpha_pair(model),
        lambda: pos_clusters(model, artefact),
        lambda: code_snippet(model),
        lambda: periodic(model),
        lambda: wikipedia(model, wiki_text),
        lambda: block_miss(model, wiki_text),
    ]
    if artefact is not None:
        steps.append(lambda: learned_miss(model, artefact))
    examples: list[Example] = []
    with torch.inference_mode():
        for step in steps:
            got = step()
            for ex in got if isinstance(got, list) else [got]:
                log.info("%-18s layer %d head %d %s: %s", ex.slug, ex.state["layer"],
                         ex.state["head"], ex.state["method"],
                         ", ".join(f"{f['label']} {f['value']}" for f in ex.figures))  # fmt: skip
                examples.append(ex)
    return {
        "version": FORMAT_VERSION,
        "model": model.model_id,
        "artefact": None if artefact is None else artefact_name(artefact.model_id, artefact.alpha),
        "built_by": "scripts/build_gallery.py",
        "examples": [ex.to_json() for ex in examples],
    }


def dumps(data: dict) -> str:
    """The file's text (what --check compares byte for byte)."""
    return json.dumps(data, ensure_ascii=False, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=OUT, help=f"output JSON (default {OUT})")
    ap.add_argument("--wikitext", type=Path, default=WIKITEXT, help="WikiText-2 valid.txt")
    ap.add_argument("--artefact", default=None, help="a Sparsefinder artefact (default: shipped)")
    ap.add_argument("--model", default=None, help="a local BERT checkpoint (default: the default)")
    ap.add_argument("--device", default="cpu", help="cpu, cuda or auto (default cpu)")
    ap.add_argument("--check", action="store_true", help="build, compare with --out, write nothing")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.wikitext.is_file():
        print(f"build_gallery: error: no WikiText-2 file at {args.wikitext} (--wikitext)",
              file=sys.stderr)  # fmt: skip
        return 2
    model = load_model(args.model, device=args.device)
    artefact = load_artefact_for(model, args.artefact)
    text = dumps(build(model, artefact, wiki_passage(args.wikitext, model)))
    if args.check:
        same = args.out.is_file() and args.out.read_text(encoding="utf-8") == text
        log.info("%s is %s", args.out, "up to date" if same else "OUT OF DATE")
        return 0 if same else 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    log.info("wrote %s (%d bytes)", args.out, len(text))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
