"""Take the default model and a benchmark text to the GPU machine, which has neither.

A GPU machine without network access gets the repository and at most 64 MiB with it, and the
default model (the adapted all-MiniLM-L6-v2, sparsescope/all-MiniLM-L6-v2-entmax1.5) in float32
is 90 MB. The pack keeps
every weight in float16 except the word embeddings, of which it keeps only the rows of the tokens
the benchmark text uses (the other rows are never read for that text): ~25 MB. Unpacked there,
the checkpoint is the model rounded to float16 (its graphs differ from the shipped model's by
that rounding, its timings do not; docs/benchmarks.md, "GPU").

    python bench/gpu_pack.py pack .gpu/pack --chars 120000     # here
    python bench/gpu_pack.py unpack .gpu/pack /tmp/model        # on the GPU machine

The text (WikiText-2 validation, its first ``--chars`` characters of prose) is written beside the
weights as ``text.txt``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

WORD = "bert.embeddings.word_embeddings.weight"  # the adapted model is saved as a BertForMaskedLM
FILES = (
    "config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
)


def _weights_file(src: Path) -> Path:
    return src / "model.safetensors"


def pack(dest: Path, chars: int) -> None:
    from safetensors.torch import load_file, save_file
    from tokenizers import Tokenizer

    from sparse_core.sources import resolve

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_entmax import WIKITEXT

    src = Path(resolve(None).path)  # the default model: the adapted MiniLM, materialised
    dest.mkdir(parents=True, exist_ok=True)
    lines = [ln.strip() for ln in WIKITEXT.read_text(encoding="utf-8").splitlines()]
    text = " ".join(ln for ln in lines if ln and not ln.startswith("="))[:chars]
    (dest / "text.txt").write_text(text, encoding="utf-8")
    tok = Tokenizer.from_file(str(src / "tokenizer.json"))
    tok.no_truncation()
    ids = sorted(set(tok.encode(text).ids) | set(range(110)))  # the specials among the first
    state = load_file(str(_weights_file(src)))
    out = {k: v.to(torch.float16) for k, v in state.items() if k != WORD}
    out["pack.vocab_ids"] = torch.tensor(ids, dtype=torch.int32)
    out["pack.vocab_rows"] = state[WORD][ids].to(torch.float16)
    out["pack.vocab_size"] = torch.tensor([state[WORD].shape[0]], dtype=torch.int32)
    save_file(out, str(dest / "pack.safetensors"))
    for name in FILES:
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    size = sum(f.stat().st_size for f in dest.iterdir())
    print(
        f"packed {len(ids)} of {state[WORD].shape[0]} word rows; {size / 2**20:.1f} MiB in {dest}"
    )


def unpack(src: Path, dest: Path) -> None:
    from safetensors.torch import load_file, save_file

    dest.mkdir(parents=True, exist_ok=True)
    state = load_file(str(src / "pack.safetensors"))
    ids = state.pop("pack.vocab_ids").long()
    rows = state.pop("pack.vocab_rows").float()
    vocab = int(state.pop("pack.vocab_size")[0])
    word = torch.zeros(vocab, rows.shape[1])
    word[ids] = rows
    full = {k: v.float().contiguous() for k, v in state.items()}
    full[WORD] = word
    save_file(full, str(dest / "model.safetensors"))
    for name in (*FILES, "text.txt"):
        if (src / name).exists():
            shutil.copy(src / name, dest / name)
    cfg = json.loads((dest / "config.json").read_text())
    print(f"unpacked {cfg.get('model_type')} to {dest}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pack")
    p.add_argument("dest", type=Path)
    p.add_argument("--chars", type=int, default=120_000)
    u = sub.add_parser("unpack")
    u.add_argument("src", type=Path)
    u.add_argument("dest", type=Path)
    a = ap.parse_args()
    if a.cmd == "pack":
        pack(a.dest, a.chars)
    else:
        unpack(a.src, a.dest)


if __name__ == "__main__":
    main()
