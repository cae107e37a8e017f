"""Oracle budgets (definitions §8, sparse_core.budgets) against a brute-force search per query: the
least k whose top-k (the oracle ``topk``'s stable order of the scores) recovers ρ of the query's
support, and the least mass p among the row's own cumulative masses for which ``topp`` does."""

from __future__ import annotations

import numpy as np
import pytest

from sparse_core import budgets as BU
from sparse_core import methods as M
from sparse_core.methods.oracle import topk_scores, topp_keep
from sparse_core.methods.selection import stable_order

TEXT = "The chef who ran to the store was out of food, so he went back home to cook some soup."


@pytest.fixture(scope="module", params=[False, True], ids=["bidirectional", "causal"])
def ctx(request, tiny_model):
    return M.PredictContext.from_run(tiny_model.run(TEXT, causal=request.param), None)


@pytest.mark.parametrize("g", range(0, 130))
def test_needed_is_the_least_count_meeting_the_level(g):
    for lv in (0.9, 0.99, 0.5, 0.75):
        c = int(BU.needed(np.array([g]), lv)[0])
        if g == 0:
            assert c == 0
            continue
        assert c / g >= lv and (c == 0 or (c - 1) / g < lv)


def brute_k(scores_row, gold_row, level):
    g = gold_row.sum()
    order = stable_order(scores_row)
    for k in range(1, len(order) + 1):
        if gold_row[order[:k]].sum() / g >= level:
            return k
    raise AssertionError


def test_k_and_p_budgets_equal_a_brute_force_search(ctx):
    n = ctx.n
    for layer in range(ctx.layers):
        for head in range(ctx.heads):
            got = BU.head_budgets(ctx, layer, head)
            gold = ctx.head_graph(layer, head)
            s = topk_scores(ctx, layer, head)
            ei, ej = np.nonzero(gold)
            p = ctx.head_probs(layer, head)[ei, ej]
            for lv in BU.LEVELS:
                for i in range(n):
                    assert got["k"][lv][i] == brute_k(s[i], gold[i], lv), (layer, head, i, lv)
                # p: the least of the row's cumulative masses at which top-p recovers ρ
                for i in range(n):
                    row = ei == i
                    masses = np.cumsum(np.sort(p[row].astype(np.float64))[::-1])
                    best = None
                    for cand in sorted(masses):
                        keep = topp_keep(np.zeros(row.sum(), int), ei[row], ej[row], p[row],
                                         [cand], n)[0]  # fmt: skip
                        if keep.sum() / row.sum() >= lv:
                            best = cand
                            break
                    assert got["p"][lv][i] == pytest.approx(best, rel=0, abs=1e-12), (i, lv)


def test_budgets_json_shapes(ctx):
    body = BU.budgets_json(ctx)
    assert body["levels"] == [0.9, 0.99] and len(body["heads"]) == ctx.layers * ctx.heads
    h = body["heads"][0]
    assert set(h["k"]) == {"0.9", "0.99"} and len(h["k"]["0.9"]["q"]) == len(BU.QUANTILES)
    q = h["k"]["0.99"]["q"]
    assert q == sorted(q) and h["k"]["0.9"]["q"][-1] <= q[-1]  # more recall, more keys
    one = BU.head_json(ctx, 1, 2)
    assert len(one["k"]["0.9"]["values"]) == ctx.n
    assert one["k"]["0.99"]["values"] == BU.head_budgets(ctx, 1, 2)["k"][0.99].tolist()
    # the k budget is at least the keys needed and at most the valid keys
    b = BU.head_budgets(ctx, 0, 1)
    need = BU.needed(b["support"], 0.99)
    assert (b["k"][0.99] >= need).all()
    assert (b["p"][0.99] <= 1 + 1e-6).all() and (b["p"][0.99] > 0).all()
