"""What a miss costs (sparse_core.metrics.output_error): ‖(P̃ − P)V‖_F / ‖PV‖_F with P̃ the
head's entmax over the kept pairs only, against a float64 reference written here."""

from __future__ import annotations

import math

import pytest
import torch

from sparse_core.metrics import output_error
from sparse_core.outputs import normalize_alpha

TEXT = "The quick brown fox jumps over the lazy dog while the old cat sleeps in the warm sun."


def entmax64(s: torch.Tensor, alpha: float) -> torch.Tensor:
    """α-entmax of each row of ``s`` (float64, −inf masked) by bisection on the threshold τ:
    p_i = [(α − 1) s_i − τ]_+^{1/(α−1)}, Σ p = 1 (softmax at α = 1); an all −inf row is zeros."""
    out = torch.zeros_like(s, dtype=torch.float64)
    for r in range(s.shape[0]):
        row = s[r].double()
        ok = torch.isfinite(row)
        if not ok.any():
            continue
        x = row[ok]
        if alpha == 1.0:
            out[r, ok] = torch.softmax(x, 0)
            continue
        z = (alpha - 1) * x
        lo, hi = float(z.max()) - 1.0, float(z.max())
        for _ in range(200):
            tau = (lo + hi) / 2
            tot = float(torch.clamp(z - tau, min=0).pow(1 / (alpha - 1)).sum())
            lo, hi = (tau, hi) if tot > 1 else (lo, tau)
        p = torch.clamp(z - (lo + hi) / 2, min=0).pow(1 / (alpha - 1))
        out[r, ok] = p / p.sum()
    return out


def reference(out, layer: int, head: int, mask: torch.Tensor) -> float:
    q = out.queries[layer, head].double()
    k = out.keys[layer, head].double()
    v = out.values[layer, head].double()
    s = (q @ k.T) * float(out.scaling[layer])
    n = out.n
    valid = torch.ones(n, n, dtype=torch.bool)
    if out.causal:
        valid = valid.tril()
    a = float(out.alpha_table()[layer, head])
    p = entmax64(s.masked_fill(~valid, -math.inf), a)
    pt = entmax64(s.masked_fill(~(mask & valid), -math.inf), a)
    return float(((pt - p) @ v).norm() / (p @ v).norm())


def test_the_gold_mask_costs_exactly_nothing(tiny_model):
    for causal in (False, True):
        out = tiny_model.run(TEXT, alpha=1.5, causal=causal)
        for layer in range(out.layers):
            for head in range(out.heads):
                g = out.graph[layer, head]
                assert output_error(out, layer, head, g) == 0.0
                assert output_error(out, layer, head, torch.ones_like(g)) == 0.0
                assert output_error(out, layer, head, g, rows=3) == 0.0


@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0])
def test_against_a_float64_reference(tiny_model, alpha):
    out = tiny_model.run(TEXT, alpha=alpha)
    g = torch.Generator().manual_seed(7)
    n = out.n
    for layer, head in [(0, 0), (1, 2), (out.layers - 1, out.heads - 1)]:
        for keep in (0.2, 0.5, 0.8):
            mask = torch.rand(n, n, generator=g) < keep
            want = reference(out, layer, head, mask)
            got = output_error(out, layer, head, mask, rows=5)  # blocks of 5 rows
            assert got == pytest.approx(want, rel=1e-4, abs=1e-6), (layer, head, keep)
            assert got > 0


def test_causal_and_per_head_alpha(tiny_model):
    table = normalize_alpha(torch.linspace(1.2, 1.9, 8).view(2, 4), 2, 4)
    out = tiny_model.run(TEXT, alpha=table, causal=True)
    mask = torch.ones(out.n, out.n, dtype=torch.bool)
    mask[:, 0] = False  # no first token: a sink's mass must move elsewhere
    for layer in range(out.layers):
        for head in range(out.heads):
            want = reference(out, layer, head, mask)
            assert output_error(out, layer, head, mask) == pytest.approx(want, rel=1e-4, abs=1e-6)


def test_an_empty_row_is_zeros(tiny_model):
    """A mask that keeps nothing: P̃ = 0, so the error is ‖PV‖ / ‖PV‖ = 1."""
    out = tiny_model.run(TEXT)
    none = torch.zeros(out.n, out.n, dtype=torch.bool)
    assert output_error(out, 0, 1, none) == pytest.approx(1.0, abs=1e-12)


def test_the_sparse_store_gives_the_dense_figure(tiny_model):
    dense = tiny_model.run(TEXT)
    old = tiny_model.dense_max_bytes
    tiny_model.dense_max_bytes = 0  # recorded as CSR
    try:
        sparse = tiny_model.run(TEXT)
    finally:
        tiny_model.dense_max_bytes = old
    assert not sparse.attn.is_dense
    mask = torch.rand(dense.n, dense.n, generator=torch.Generator().manual_seed(1)) < 0.4
    a = output_error(dense, 1, 1, mask)
    assert output_error(sparse, 1, 1, mask, rows=4) == pytest.approx(a, rel=1e-5)


def test_bad_masks_and_runs_without_values_are_refused(tiny_model):
    out = tiny_model.run(TEXT)
    with pytest.raises(ValueError, match="bool mask"):
        output_error(out, 0, 0, torch.ones(out.n, out.n))
    out.values = None
    with pytest.raises(ValueError, match="no values"):
        output_error(out, 0, 0, out.graph[0, 0])
