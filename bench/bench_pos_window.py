"""POS tagging of a truncated window deep in a long text.

    python -m bench.bench_pos_window                 # tagging alone, before vs after
    python -m bench.bench_pos_window --analysis      # and whole analyses on the real model

A 500,000-character text (wikitext-2's validation text, repeated); two 512-token windows, at
token 0 and at token 100,000 (character ~420,000). "before" tags as the server did until issue
26: spaCy over ``text[:window end]``, from character 0; "after" is the server's tagger now
(``Tagger.start``: the window plus ``pos.CONTEXT_CHARS`` on each side). Both run side by side in
one process on the real spaCy pipeline; each figure is the median of ``--repeats`` runs.
``--analysis``: ``AnalysisService.analyze`` of each window (real model, in process, a cache miss
each time), the after-code only, deep / start.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from tests.checkout import use_the_checkout  # noqa: E402

use_the_checkout()  # ``import sparsescope``: this checkout's app/, not an installed copy

from sparse_core import pos  # noqa: E402

WIKITEXT = Path("/work/shared/data/wikitext-2/valid.txt")


def long_text(chars: int) -> str:
    base = WIKITEXT.read_text(encoding="utf-8")
    return (base * (chars // len(base) + 1))[:chars]


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1000 * statistics.median(times)


def tagging(text: str, repeats: int) -> None:
    from sparse_core.testing import tiny_model
    from sparsescope.engine.tagging import Tagger

    model, tagger = tiny_model(seed=0), Tagger()
    pos.tagger()  # loaded before timing
    rows = {}
    for name, start in (("start", 0), ("deep", 100_000)):
        enc = model.encode(text, truncate=True, start=start)
        end = max(b for (_, b), sp in zip(enc.offsets, enc.special, strict=True) if not sp)
        before = median_ms(lambda end=end: pos.word_tags(text[:end]), repeats)
        after = median_ms(lambda enc=enc: tagger.start(text, enc).result(), repeats)
        lo, hi = pos.window_span(text, enc.offsets, enc.special)
        rows[name] = (before, after)
        print(
            f"window at token {start:>7,} (chars to {end:>7,}): before {before:9.1f} ms "
            f"({end:,} chars tagged)   after {after:7.1f} ms ({hi - lo:,} chars tagged)"
        )
    for k, label in ((0, "before"), (1, "after")):
        print(f"{label}: deep / start = {rows['deep'][k] / rows['start'][k]:.1f}x")
    print(f"deep window, before / after = {rows['deep'][0] / rows['deep'][1]:.1f}x")


def analyses(text: str, repeats: int) -> None:
    from sparsescope.engine.request import AnalysisRequest
    from sparsescope.engine.service import AnalysisService
    from sparsescope.engine.settings import Settings

    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env(data_dir=tmp)
        svc = AnalysisService(settings)
        svc.start()
        rows = {}
        for name, start in (("start", 0), ("deep", 100_000)):
            k = iter(range(10**6))
            rows[name] = median_ms(  # a new text each run: a cache miss
                lambda start=start, k=k: svc.analyze(
                    AnalysisRequest(f"{next(k)} " + text, truncate=True, start=start)
                ),
                repeats,
            )
            print(f"analysis, window at token {start:>7,}: {rows[name]:8.1f} ms")
        print(f"analysis: deep / start = {rows['deep'] / rows['start']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chars", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--analysis", action="store_true", help="also whole analyses (real model)")
    args = ap.parse_args()
    text = long_text(args.chars)
    print("load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))
    tagging(text, args.repeats)
    if args.analysis:
        analyses(text, args.repeats)
    print("load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
