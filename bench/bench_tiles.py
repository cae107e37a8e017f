"""Benchmark: one tile of a long head's level-of-detail pyramid, made from the
edges of the tile's rows (``SparseProbs.row_edges`` + ``lod.tile_from_edges``, what the tile
endpoint does for a CSR store) against a dense head first (``lod.tile_body`` on
``attn.head``, what it did before), side by side on the same run; the two bodies must be equal.
Also the head payloads' edge list (the page's first request for a long head): the store's rows
against a dense head's non-zeros.

The model is the default one with its positions tiled to ``--n`` (``testing.tiled_positions``),
the text WikiText-2's validation prose, α = ``--alpha``; torch on ``--threads`` threads; medians
of ``--repeats``.

    python bench/bench_tiles.py --n 4096 --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

from sparse_core import load_model  # noqa: E402
from sparse_core.testing import tiled_positions  # noqa: E402
from sparsescope.engine import lod  # noqa: E402

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2" / "valid.txt"


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def side_by_side(label: str, old, new, same: bool, repeats: int) -> None:
    """Print the two ways' medians and their ratio; stop if their results differ."""
    t_old, t_new = median_ms(old, repeats), median_ms(new, repeats)
    print(
        f"  {label}: dense head {t_old:8.1f} ms, row edges {t_new:7.2f} ms "
        f"({t_old / t_new:5.1f}x), equal: {same}"
    )
    if not same:
        sys.exit(f"{label}: the two results differ")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--alpha", type=float, default=1.5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--text-file", type=Path, default=CORPUS)
    ap.add_argument("--layer", type=int, default=2)
    ap.add_argument("--head", type=int, default=5)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = tiled_positions(load_model(), a.n)
    text = a.text_file.read_text(encoding="utf-8")[: a.n * 6]
    out = model.run(text, alpha=a.alpha, truncate=True, hidden=False)
    st, n = out.attn, out.n
    kind = "dense" if st.is_dense else f"CSR, {st.nbytes() / 2**20:.0f} MiB"
    print(f"n = {n}, alpha = {a.alpha}, P {kind}, {a.threads} thread(s), median of {a.repeats}")
    top = lod.top(n)
    li, h = a.layer, a.head

    def dense_edges():  # the head payloads before: a dense head, then its non-zeros
        p = st.head(li, h)
        ij = p.nonzero()
        return ij[:, 0], ij[:, 1], p[ij[:, 0], ij[:, 1]]

    def store_edges():  # now: the store's own rows (payloads.head_body / head_graph_body)
        return st.row_edges(li, h, slice(0, n))

    same = all(torch.equal(x, y) for x, y in zip(dense_edges(), store_edges(), strict=True))
    side_by_side("the head's edges (graph payload)", dense_edges, store_edges, same, a.repeats)
    for level, ti, tj in ((top, 0, 0), (max(0, top - 2), 1, 1), (0, 3, 2)):
        r0, r1, _, _ = lod.tile_span(n, level, ti, tj)

        def old(level=level, ti=ti, tj=tj):
            return lod.tile_body(st.head(li, h), level, ti, tj)

        def new(level=level, ti=ti, tj=tj, rows=slice(r0, r1)):
            return lod.tile_from_edges(*st.row_edges(li, h, rows), n, level, ti, tj)

        label = f"level {level} tile ({ti}, {tj}), rows {r0}-{r1}"
        side_by_side(label, old, new, old() == new(), a.repeats)


if __name__ == "__main__":
    main()
