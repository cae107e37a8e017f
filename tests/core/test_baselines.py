"""Reformer and Routing baselines against their definitions (definitions §3) on hand-made cases."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import baselines as B
from sparse_core.errors import SparsescopeError

FAST = settings(max_examples=40, deadline=None)


def rand_qk(seed: int, L=2, H=3, n=17, r=4):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(L, H, n, r, generator=g), torch.randn(L, H, n, r, generator=g)


# ----------------------------------------------------------------------------- reformer


@FAST
@given(seed=st.integers(0, 10_000), nb=st.sampled_from([2, 4, 6, 8, 20]), rounds=st.integers(1, 3))
def test_reformer_matches_definition(seed, nb, rounds):
    q, k = rand_qk(seed)
    buckets = B.reformer_buckets(q, k, nb, rounds, seed=seed)
    assert buckets.shape == (2, 3, rounds, 17)
    assert buckets.min() >= 0 and buckets.max() < nb
    # bucket = argmax([xR; -xR]) with x = [q; k], recomputed by hand for every head and round
    rot = B.reformer_rotations(2, 3, 8, nb, rounds, seed)
    for li in range(2):
        for hi in range(3):
            x = torch.cat([q[li, hi], k[li, hi]], dim=-1).double()  # (n, 2r)
            for u in range(rounds):
                proj = x @ rot[li, hi, u]
                want = torch.cat([proj, -proj], dim=-1).argmax(-1)
                assert torch.equal(buckets[li, hi, u], want)
    mask = B.reformer(q, k, nb, rounds, seed=seed)
    want = torch.zeros(2, 3, 17, 17, dtype=torch.bool)
    for u in range(rounds):
        b = buckets[:, :, u]
        want |= b[..., :, None] == b[..., None, :]
    assert torch.equal(mask, want)
    # a token's query and key share its bucket: the diagonal is always predicted; symmetric
    assert mask.diagonal(dim1=-2, dim2=-1).all()
    assert torch.equal(mask, mask.transpose(-1, -2))


def test_reformer_opposite_tokens_never_share_a_bucket():
    x = torch.randn(1, 1, 1, 4)
    q = torch.cat([x, -x], dim=2)  # token 1 is token 0 negated (queries and keys)
    b = B.reformer_buckets(q, q.clone(), 8, rounds=4)[0, 0]  # (rounds, 2)
    assert ((b[:, 0] - b[:, 1]).abs() == 4).all()  # argmax of [xR; -xR] vs [-xR; xR]
    assert not B.reformer(q, q.clone(), 8, rounds=4)[0, 0, 0, 1]


def test_reformer_prefixes_and_determinism():
    q, k = rand_qk(3)
    r4 = B.reformer_rotations(2, 3, 8, 4, 2, seed=5)
    r8 = B.reformer_rotations(2, 3, 8, 8, 3, seed=5)
    assert torch.equal(r8[..., :2, :, :2], r4)  # rounds and columns do not depend on B / rounds
    b1 = B.reformer_buckets(q, k, 6, rounds=1, seed=1)
    b3 = B.reformer_buckets(q, k, 6, rounds=3, seed=1)
    assert torch.equal(b3[:, :, :1], b1)
    assert torch.equal(B.reformer_buckets(q, k, 6, 3, seed=1), b3)
    assert not torch.equal(B.reformer_buckets(q, k, 6, 3, seed=2), b3)


@pytest.mark.parametrize("nb", [0, 3, 7, -2, 2.0, True])
def test_reformer_rejects_bad_bucket_counts(nb):
    q, k = rand_qk(0)
    with pytest.raises(SparsescopeError, match="n_buckets"):
        B.reformer_buckets(q, k, nb)


# ----------------------------------------------------------------------------- routing


@FAST
@given(seed=st.integers(0, 10_000), C=st.integers(1, 9), n=st.integers(2, 30))
def test_routing_balanced_and_unchosen_tokens_have_no_edges(seed, C, n):
    C = min(C, 2 * n)
    q, k = rand_qk(seed, n=n)
    Q, K = B.routing_members(q, k, C)
    assert Q.shape == K.shape == (2, 3, C, n)
    top = min(n // C + 1, n)
    assert (Q.sum(-1) == top).all() and (K.sum(-1) == top).all()  # balanced sizes
    mask = B.routing(q, k, C)
    want = (Q[..., :, :, None] & K[..., :, None, :]).any(dim=-3)  # ∃ c: query i and key j
    assert torch.equal(mask, want)
    assert not mask[~Q.any(-2)].any()  # a query no centroid took: an empty row
    assert not mask.transpose(-1, -2)[~K.any(-2)].any()  # a key no centroid took: empty column
    # each centroid took its top queries / keys by cosine (ties to the lower position)
    cent = B.routing_centroids(q, k, C).numpy()
    cos = torch.from_numpy(cent @ B._unit(q.double().numpy()).swapaxes(-1, -2))  # (L, H, C, n)
    order = torch.argsort(cos, dim=-1, descending=True, stable=True)[..., :top]
    assert torch.equal(Q, torch.zeros_like(Q).scatter_(-1, order, True))


def test_routing_two_obvious_clusters():
    # queries and keys point either along e0 or along e1: two clusters, each picks its own
    n = 8
    e0, e1 = torch.eye(4)[0], torch.eye(4)[1]
    side = torch.tensor([0, 1, 0, 1, 0, 1, 0, 1]).bool()
    x = torch.where(side[:, None], e1, e0) * torch.linspace(1, 2, n)[:, None]
    x = x + 0.01 * torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
    q = x.view(1, 1, n, 4)
    Q, K = B.routing_members(q, q.clone(), 2)  # top 5 each
    mask = B.routing(q, q.clone(), 2)[0, 0]
    for c in range(2):
        members = Q[0, 0, c]
        assert members[side].all() or members[~side].all()  # the 4 of its own side are in
    assert Q[0, 0, 0, side].all() != Q[0, 0, 1, side].all()  # one cluster per side
    same = side[:, None] == side[None, :]
    assert mask[same].all()  # every pair on the same side is predicted


def test_routing_one_cluster_takes_everything():
    q, k = rand_qk(1, n=9)
    assert B.routing(q, k, 1).all()


def test_top_members_matches_stable_sort():
    g = torch.Generator().manual_seed(0)
    s = torch.randint(0, 4, (5, 30), generator=g).double()  # many ties
    for m in (1, 3, 7, 30):
        order = torch.argsort(s, dim=-1, descending=True, stable=True)[..., :m]
        want = torch.zeros_like(s, dtype=torch.bool).scatter_(-1, order, True)
        assert torch.equal(B.top_members(s, m), want)


def test_routing_errors():
    q, k = rand_qk(0, n=3)
    with pytest.raises(SparsescopeError, match="n_clusters"):
        B.routing(q, k, 0)
    with pytest.raises(SparsescopeError, match="n_clusters"):
        B.routing(q, k, 7)  # more than the 2n points
    with pytest.raises(SparsescopeError, match="same shape"):
        B.routing(q, k[..., :2, :], 2)


def _routing_reference(qp, kp, C, iters=B.ROUTING_ITERS):
    """Spherical k-means as the module docstring states it, every head every step (the plain
    loop: farthest-point init per C, all heads until none moves)."""
    import numpy as np

    x = B._unit(torch.cat([qp, kp], dim=-2).numpy().astype(np.float64))
    lead, (m, r) = x.shape[:-2], x.shape[-2:]
    x = x.reshape(-1, m, r)
    A = x.shape[0]
    mean = x.mean(axis=1)
    norm = np.linalg.norm(mean, axis=-1, keepdims=True)
    cent = np.empty((A, C, r))
    cent[:, 0] = np.where(norm > 1e-9, mean / np.maximum(norm, 1e-12), x[:, 0])
    best = np.einsum("amr,ar->am", x, cent[:, 0])
    for c in range(1, C):
        cent[:, c] = x[np.arange(A), best.argmin(axis=1)]
        best = np.maximum(best, np.einsum("amr,ar->am", x, cent[:, c]))
    off = (np.arange(A) * C)[:, None]
    prev = None
    for _ in range(iters):
        idx = ((x @ cent.transpose(0, 2, 1)).argmax(axis=-1) + off).ravel()
        if prev is not None and np.array_equal(idx, prev):
            break
        prev = idx
        count = np.bincount(idx, minlength=A * C).reshape(A, C, 1)
        sums = np.stack(
            [np.bincount(idx, weights=x[..., d].ravel(), minlength=A * C) for d in range(r)], -1
        ).reshape(A, C, r)
        cent = np.where(count > 0, B._unit(sums), cent)
    return cent.reshape(*lead, C, r)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(3, 40), heads=st.integers(1, 6))
def test_routing_centroids_equal_the_plain_loop_bit_for_bit(seed, n, heads):
    """Settled heads leaving the Lloyd loop and one farthest-point init shared by every C
    (its first C centroids) change nothing: the centroids equal the plain loop's exactly."""
    import numpy as np

    g = torch.Generator().manual_seed(seed)
    qp = torch.randn(2, heads, n, 4, generator=g)
    kp = torch.randn(2, heads, n, 4, generator=g)
    most = min(20, 2 * n)
    init = B.farthest_points(qp, kp, most)
    for C in sorted(c for c in {1, 2, 3, 8, most} if c <= most):
        want = _routing_reference(qp, kp, C)
        assert np.array_equal(B.routing_centroids(qp, kp, C).numpy(), want), C
        assert np.array_equal(B.routing_centroids(qp, kp, C, init=init).numpy(), want), C
        for short in (1, 3):  # early stops cut every head at the same step
            assert np.array_equal(
                B.routing_centroids(qp, kp, C, iters=short).numpy(),
                _routing_reference(qp, kp, C, iters=short),
            )


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(2, 30), levels=st.integers(1, 3))
def test_routing_centroids_with_ties_equal_the_plain_loop(seed, n, levels):
    """Projections on a coarse grid (repeated points, so equal scores and empty clusters are
    common): the compiled Lloyd step (``_method_kernels.lloyd_step``) takes the first of equal
    maxima and an empty cluster keeps its centroid, as the plain numpy loop, bit for bit."""
    import numpy as np

    g = torch.Generator().manual_seed(seed)
    qp = torch.randint(-levels, levels + 1, (1, 3, n, 4), generator=g).float()
    kp = torch.randint(-levels, levels + 1, (1, 3, n, 4), generator=g).float()
    qp[..., 0] += 0.5  # no zero vector
    for C in sorted(c for c in {1, 2, 5, 12} if c <= 2 * n):
        want = _routing_reference(qp, kp, C)
        assert np.array_equal(B.routing_centroids(qp, kp, C).numpy(), want), C


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000), C=st.integers(1, 40), m=st.integers(1, 50),
    levels=st.integers(1, 4), with_prev=st.booleans(),
)  # fmt: skip
def test_lloyd_step_is_argmax_and_bincount(seed, C, m, levels, with_prev):
    """The compiled Lloyd step (``_method_kernels.lloyd_step``) takes the first of equal scores,
    as ``argmax`` (scores from a few levels, so most points tie; -0.0 next to 0.0 too), flags
    the heads whose assignment moved, and gives exactly ``np.bincount``'s counts and weighted
    sums (float64, points added in order) for the moved heads."""
    import numpy as np

    from sparse_core._method_kernels import lloyd_step

    rng = np.random.default_rng(seed)
    A, r = 5, 4
    s = rng.integers(-levels, levels + 1, size=(3, C, m)).astype(np.float64) / 4
    s[s == 0] = rng.choice([0.0, -0.0], size=int((s == 0).sum()))
    x = rng.standard_normal((A, m, r))
    act = np.sort(rng.choice(A, size=3, replace=False)).astype(np.int64)
    want = s.argmax(axis=1)
    prev = want.astype(np.uint8).copy()
    if with_prev and C > 1:
        prev[1, 0] = (prev[1, 0] + 1) % C  # head 1 moved, 0 and 2 did not
    ids, moved, count, sums = lloyd_step(
        s, prev if with_prev else np.empty((0, m), np.uint8), x, act
    )
    assert ids.dtype == np.uint8
    assert np.array_equal(ids, want)
    assert list(moved) == ([False, C > 1, False] if with_prev else [True] * 3)
    for a in np.flatnonzero(moved):
        assert np.array_equal(count[a], np.bincount(want[a], minlength=C))
        for d in range(r):
            w = np.bincount(want[a], weights=x[act[a], :, d], minlength=C)
            assert np.array_equal(sums[a, :, d], w)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), r=st.integers(1, 12), scale=st.integers(-8, 8))
def test_unit_equals_division_by_numpy_norm(seed, r, scale):
    """Routing's unit rows equal ``x / max(np.linalg.norm(x), 1e-12)`` bit for bit (the
    column-by-column sum below 8 columns), zero rows included."""
    import numpy as np

    rng = np.random.default_rng(seed)
    x = rng.standard_normal((3, 9, r)) * 10.0**scale
    x[0, 0] = 0.0
    want = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    assert np.array_equal(B._unit(x), want)


def test_repeated_ids_and_seeds_give_each_their_own_draw():
    """Stacked texts repeat layer ids and seeds (``PredictContext.stack``): each row is still
    exactly the draw of its own (layer, head) / seed, whatever the order and repetition."""
    li, hi = torch.tensor([3, 1, 3, 0, 1, 3]), torch.tensor([2, 0, 2, 5])
    rot = B.reformer_rotations(6, 4, 8, 8, 2, 5, li, hi)
    for a, la in enumerate(li.tolist()):
        for b, hb in enumerate(hi.tolist()):
            one = B.reformer_rotations(1, 1, 8, 8, 2, 5, torch.tensor([la]), torch.tensor([hb]))
            assert torch.equal(rot[a, b], one[0, 0])
    seeds = torch.tensor([[7, 1003, 7], [2, 7, 1003]])
    pos = B.longformer_positions(20, 4, seeds)
    for idx, s in enumerate(seeds.flatten().tolist()):
        alone = B.longformer_positions(20, 4, torch.tensor([s]))[0]
        assert torch.equal(pos.view(-1, 20)[idx], alone)
