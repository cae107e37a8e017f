"""Patterns against their set definitions (definitions §2), the oracle figures, the shared hash
PRNG."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import textwrap

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sparse_core import patterns as P
from sparse_core import rng

FAST = settings(max_examples=60, deadline=None)


def from_pred(n: int, pred) -> torch.Tensor:
    """The (n, n) mask {(i, j) : pred(i, j)} built by plain loops (the independent reference)."""
    return torch.tensor([[bool(pred(i, j)) for j in range(n)] for i in range(n)])


def strided_ref(n, l, causal, part):
    def a1(i, j):
        return max(0, i - l) <= j <= i if causal else abs(i - j) <= l

    def a2(i, j):
        return (i - j) % l == 0 and (j <= i or not causal)

    sel = {"A1": a1, "A2": a2, "union": lambda i, j: a1(i, j) or a2(i, j)}[part]
    return from_pred(n, sel)


def fixed_ref(n, l, c, causal, part, head=None):
    q = 0 if head is None else head % (l // c)
    summary = set(range(l - (q + 1) * c, l - q * c))  # offsets inside a block

    def a1(i, j):
        return j // l == i // l

    def a2(i, j):
        return j % l in summary

    sel = {"A1": a1, "A2": a2, "union": lambda i, j: a1(i, j) or a2(i, j)}[part]
    return from_pred(n, lambda i, j: sel(i, j) and (j <= i or not causal))


# ----------------------------------------------------------------------------- set definitions


@FAST
@given(
    n=st.integers(1, 40),
    l=st.integers(1, 12),
    causal=st.booleans(),
    part=st.sampled_from(P.PARTS),
)
def test_strided_matches_definition(n, l, causal, part):
    m = P.strided(n, l, causal=causal, part=part)
    assert m.dtype == torch.bool and m.shape == (n, n)
    assert torch.equal(m, strided_ref(n, l, causal, part))


@FAST
@given(
    n=st.integers(1, 40),
    lc=st.integers(1, 12).flatmap(lambda l: st.tuples(st.just(l), st.integers(1, l))),
    causal=st.booleans(),
    part=st.sampled_from(P.PARTS),
    head=st.none() | st.integers(0, 9),
)
def test_fixed_matches_definition(n, lc, causal, part, head):
    l, c = lc
    m = P.fixed(n, l, c, causal=causal, part=part, head=head)
    assert torch.equal(m, fixed_ref(n, l, c, causal, part, head))


def test_strided_causal_a1_has_l_plus_1_keys():
    m = P.strided(64, 8, part="A1")
    assert m[20].sum() == 9 and m[3].sum() == 4


def test_fixed_a2_is_last_c_positions_of_each_block():
    # l = 4, c = 2: summary columns are 2, 3, 6, 7, 10, 11 (never position l itself)
    m = P.fixed(12, 4, 2, causal=False, part="A2")
    assert m[0].nonzero().flatten().tolist() == [2, 3, 6, 7, 10, 11]
    assert torch.equal(m, m[:1].expand(12, 12))  # bidirectional: every row sees every summary


def test_fixed_heads_take_distinct_chunks():
    l, c = 8, 2
    chunks = [P.fixed(16, l, c, causal=False, part="A2", head=h)[0] for h in range(l // c)]
    assert chunks[0].nonzero().flatten().tolist() == [6, 7, 14, 15]  # counted back from block end
    assert chunks[1].nonzero().flatten().tolist() == [4, 5, 12, 13]
    assert torch.equal(torch.stack(chunks).sum(0), torch.ones(16, dtype=torch.long))  # a partition
    wrapped = P.fixed(16, l, c, causal=False, part="A2", head=l // c)
    assert torch.equal(wrapped, P.fixed(16, l, c, causal=False, part="A2"))


@FAST
@given(n=st.integers(1, 40), w=st.integers(0, 15), causal=st.booleans())
def test_window_matches_definition(n, w, causal):
    expect = from_pred(n, lambda i, j: w > 0 and abs(i - j) <= w // 2 and (j <= i or not causal))
    assert torch.equal(P.window(n, w, causal=causal), expect)


def test_window_widths():
    assert not P.window(5, 0).any()
    assert torch.equal(P.window(5, 1), torch.eye(5, dtype=torch.bool))
    assert torch.equal(P.window(9, 2), P.window(9, 3))  # even w: floor(w / 2), documented choice
    assert P.window(50, 7)[25].sum() == 7


@FAST
@given(n=st.integers(1, 30), data=st.data())
def test_global_tokens_matches_definition(n, data):
    pos = data.draw(st.lists(st.integers(-n, n - 1), max_size=4))
    g = {p % n for p in pos}
    assert torch.equal(P.global_tokens(n, pos), from_pred(n, lambda i, j: i in g or j in g))


def test_valid_region():
    assert P.valid_region(6, False).all()
    v = P.valid_region(6, True)
    assert v.sum() == 21 and torch.equal(v, from_pred(6, lambda i, j: j <= i))


# ----------------------------------------------------------------------------- oracle figures


def test_oracle_window_sparsities_n512_w11():
    n = 512
    bi = P.window(n, 11)
    assert 1 - bi.sum().item() / n**2 == pytest.approx(0.97863, abs=5e-6)
    ca = P.window(n, 11, causal=True)
    assert 1 - ca.sum().item() / (n * (n + 1) / 2) == pytest.approx(0.97672, abs=5e-6)
    glob = P.finish(torch.zeros(n, n, dtype=torch.bool), window=11, globals_=True)
    assert 1 - glob.sum().item() / n**2 == pytest.approx(0.97092, abs=5e-6)


# ----------------------------------------------------------------------------- causality


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), seed=st.integers(0, 2**32), w=st.integers(0, 7))
def test_causal_masks_never_look_ahead(n, seed, w):
    masks = [
        P.strided(n, 3, causal=True),
        P.fixed(n, 4, 2, causal=True),
        P.window(n, w, causal=True),
        P.bigbird(n, random_keys=2, window=w, seed=seed, causal=True),
        P.longformer(n, width=w, n_globals=2, seed=seed, causal=True),
        P.finish(torch.ones(2, n, n, dtype=torch.bool), window=w, globals_=True, causal=True),
    ]
    for m in masks:
        assert not m.triu(1).any()


# ----------------------------------------------------------------------------- BigBird, Longformer


def sample_rows_ref(free: torch.Tensor, k: int, seed: int, stream: int) -> torch.Tensor:
    """The documented JS procedure, row by row with the scalar hash."""
    n = free.shape[0]
    out = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        cand = [j for j in range(n) if free[i, j]]
        m = len(cand)
        for t in range(min(k, m)):
            p = t + math.floor(rng.hash_uniform(seed, stream, i, t) * (m - t))
            cand[t], cand[p] = cand[p], cand[t]
        out[i, cand[: min(k, m)]] = True
    return out


@FAST
@given(
    n=st.integers(1, 30),
    r=st.integers(0, 8),
    w=st.integers(0, 5),
    seed=st.integers(-(2**31), 2**32),
    causal=st.booleans(),
    gl=st.sampled_from([(), (0,), (0, -1)]),
)
def test_bigbird_matches_reference_procedure(n, r, w, seed, causal, gl):
    m = P.bigbird(n, random_keys=r, window=w, globals_=gl, seed=seed, causal=causal)
    v = P.valid_region(n, causal)
    base = (P.window(n, w) | P.global_tokens(n, gl)) & v
    rand = sample_rows_ref(v & ~base, r, seed, rng.BIGBIRD_STREAM)
    assert torch.equal(m, base | rand)
    assert not (rand & base).any()  # random keys avoid the window and globals
    # every row: its window/globals plus exactly min(r, free) random keys
    free = (v & ~base).sum(1)
    assert torch.equal(m.sum(1), base.sum(1) + free.clamp(max=r))


def test_bigbird_rows_have_window_globals_and_r_keys():
    n, r = 64, 3
    m = P.bigbird(n, random_keys=r, window=3, seed=11)
    assert m[0].all() and m[-1].all() and m[:, 0].all() and m[:, -1].all()
    assert m[2:-2].sum(1).unique().tolist() == [3 + 2 + r]  # window 3, two globals, r random
    assert m[1].sum() == 3 + 1 + r  # row 1: window {0, 1, 2} already holds global 0, + n - 1


def test_bigbird_deterministic_and_seed_dependent():
    a = P.bigbird(128, random_keys=3, seed=1005)
    assert torch.equal(a, P.bigbird(128, random_keys=3, seed=1005))
    b = P.bigbird(128, random_keys=3, seed=1006)
    assert not torch.equal(a, b)


def test_bigbird_random_keys_roughly_uniform():
    # row 40 of n = 50 (window 3, no globals): 47 candidates; 300 seeds x 3 draws
    n, counts = 50, torch.zeros(50)
    for seed in range(300):
        counts += P.bigbird(n, random_keys=3, window=3, globals_=(), seed=seed)[40].float()
    free = counts[[j for j in range(n) if abs(j - 40) > 1]]
    assert free.sum() == 900
    assert free.min() > 5 and free.max() < 40  # expected 19.1 each


@FAST
@given(n=st.integers(1, 40), g=st.integers(0, 45), seed=st.integers(0, 2**40), w=st.integers(0, 5))
def test_longformer_matches_reference_procedure(n, g, seed, w):
    cand = list(range(n))
    for t in range(min(g, n)):
        p = t + math.floor(rng.hash_uniform(seed, rng.LONGFORMER_STREAM, t) * (n - t))
        cand[t], cand[p] = cand[p], cand[t]
    pos = cand[: min(g, n)]
    assert P.longformer_globals(n, g, seed) == pos
    assert len(set(pos)) == min(g, n)
    m = P.longformer(n, width=w, n_globals=g, seed=seed)
    assert torch.equal(
        m, from_pred(n, lambda i, j: (w > 0 and abs(i - j) <= w // 2) or i in pos or j in pos)
    )


def test_longformer_seed_dependent():
    assert P.longformer_globals(200, 4, 1) != P.longformer_globals(200, 4, 2)
    assert P.longformer_globals(200, 4, 1) == P.longformer_globals(200, 4, 1)


# ----------------------------------------------------------------------------- finish


@FAST
@given(
    n=st.integers(1, 20),
    w=st.integers(0, 6),
    gl=st.booleans(),
    causal=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_finish_is_or_then_and(n, w, gl, causal, seed):
    gen = torch.Generator().manual_seed(seed)
    mask = torch.rand(2, 3, n, n, generator=gen) < 0.3  # (L, H, n, n)
    before = mask.clone()
    got = P.finish(mask, window=w, globals_=gl, causal=causal)
    assert torch.equal(mask, before)  # not modified in place
    ends = (0, n - 1)
    extra = from_pred(n, lambda i, j: (w > 0 and abs(i - j) <= w // 2) or (gl and {i, j} & {*ends}))
    expect = (mask | extra) & from_pred(n, lambda i, j: j <= i or not causal)
    assert got.shape == (2, 3, n, n) and torch.equal(got, expect)


# ----------------------------------------------------------------------------- bad parameters


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: P.strided(0, 4), "n must be >= 1, got 0"),
        (lambda: P.strided(8, 0), "stride must be >= 1, got 0"),
        (lambda: P.strided(8, 2, part="A3"), "part must be one of 'A1', 'A2', 'union'"),
        (lambda: P.fixed(8, 4, 0), "c must be >= 1, got 0"),
        (lambda: P.fixed(8, 4, 5), "c must be <= stride (4), got 5"),
        (lambda: P.fixed(8, 4, 2, head=-1), "head must be >= 0, got -1"),
        (lambda: P.fixed(8, 4, 2, part="both"), "part must be one of"),
        (lambda: P.window(8, -1), "width must be >= 0, got -1"),
        (lambda: P.window(8, 2.5), "width must be an integer >= 0, got 2.5"),
        (lambda: P.global_tokens(4, [4]), "positions must lie in [-4, 4)"),
        (lambda: P.global_tokens(4, [-5]), "positions must be >= -4, got -5"),
        (lambda: P.bigbird(8, random_keys=-1), "random_keys must be >= 0, got -1"),
        (lambda: P.bigbird(8, random_keys=1, window=-3), "window must be >= 0, got -3"),
        (lambda: P.bigbird(8, random_keys=1, globals_=(9,)), "globals_ must lie in [-8, 8)"),
        (lambda: P.longformer(8, width=3, n_globals=-2), "n_globals must be >= 0, got -2"),
        (lambda: P.longformer(8, width=-1, n_globals=2), "width must be >= 0, got -1"),
        (lambda: P.valid_region(0, True), "n must be >= 1, got 0"),
        (lambda: P.finish(torch.zeros(3, 3), window=3), "mask must be a torch.bool tensor"),
        (lambda: P.finish(torch.zeros(3, 4, dtype=torch.bool)), "mask must have shape (..., n, n)"),
        (lambda: P.finish(torch.zeros(3, 3, dtype=torch.bool), window=-1), "window must be >= 0"),
    ],
)
def test_bad_parameters_raise_value_error_naming_them(call, message):
    with pytest.raises(ValueError) as err:
        call()
    assert message in str(err.value)


# ----------------------------------------------------------------------------- rng


RNG_VECTORS = [((0,), 0x01FCE552), ((1, 2, 3), 0xA6FDE042), ((7, 0, 5, 2), 0xFD7B6CA4)]


@pytest.mark.parametrize(("ints", "expect"), RNG_VECTORS)
def test_rng_test_vectors(ints, expect):
    assert rng.hash_u32(*ints) == expect
    assert rng.hash_uniform(*ints) == expect / 2**32
    assert f"{expect:#010X}"[2:] in rng.__doc__  # documented for the JS port


def test_rng_is_plain_32_bit_arithmetic():
    # an independent implementation with explicit mod 2**32 products
    def mix(x):
        x ^= x >> 16
        x = x * 2146121005 % 2**32
        x ^= x >> 15
        x = x * 2221713035 % 2**32
        return x ^ (x >> 16)

    h = 2654435769
    for v in (5, -3, 2**35 + 9):
        h = mix(h ^ (v % 2**32))
    assert rng.hash_u32(5, -3, 2**35 + 9) == h
    assert rng.hash_u32(-1) == rng.hash_u32(2**32 - 1)  # negatives taken mod 2**32


@FAST
@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=4))
def test_rng_vectorised_equals_scalar(ints):
    t = rng.hash_u32_t(*[torch.tensor([v, v + 1]) for v in ints])
    assert t.tolist() == [rng.hash_u32(*ints), rng.hash_u32(*[v + 1 for v in ints])]
    assert rng.hash_uniform_t(*ints).item() == rng.hash_uniform(*ints)


def test_rng_uniformity_sanity():
    u = rng.hash_uniform_t(42, 1, torch.arange(20000), 0)  # (20000,)
    assert ((u >= 0) & (u < 1)).all()
    assert abs(u.mean().item() - 0.5) < 0.01
    counts = torch.bincount((u * 20).long(), minlength=20).double()
    chi2 = ((counts - 1000) ** 2 / 1000).sum().item()
    assert chi2 < 45  # 19 degrees of freedom: p ~ 1e-3
    assert len(set(rng.hash_u32_t(3, torch.arange(20000)).tolist())) > 19990  # few collisions
    # neighbouring inputs decorrelated: every output bit flips about half the time
    a, b = rng.hash_u32_t(9, torch.arange(4096)), rng.hash_u32_t(10, torch.arange(4096))
    flips = torch.stack([((a ^ b) >> k) & 1 for k in range(32)]).double().mean(1)
    assert ((flips > 0.4) & (flips < 0.6)).all()


def test_rng_rejects_float_tensors():
    with pytest.raises(ValueError, match="integer tensors"):
        rng.hash_u32_t(torch.tensor([0.5]))


def docstring_js() -> str:
    """The JavaScript port exactly as printed in rng's docstring (``export`` dropped)."""
    doc = textwrap.dedent(rng.__doc__)
    code = doc[doc.index("function mix32") : doc.index("Both divisions")].strip()
    return code.replace("export ", "")


HARNESS = """
const cases = JSON.parse(process.argv[1]);
console.log(JSON.stringify(cases.map((c) => [hashU32(...c), hashUniform(...c)])));
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_rng_docstring_js_port_agrees():
    cases = [list(v) for v, _ in RNG_VECTORS] + [[-1, 4294967295, 2**40 + 5], [3, -7, 123456789]]
    cmd = ["node", "-e", docstring_js() + HARNESS, json.dumps(cases)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=30)
    assert json.loads(res.stdout) == [[rng.hash_u32(*c), rng.hash_uniform(*c)] for c in cases]


@pytest.mark.parametrize("n", [1, 2, 7, 64, 129])
@pytest.mark.parametrize("stride", [1, 2, 3, 8, 200])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("part", ["A1", "A2", "union"])
def test_strided_equals_its_formula_on_the_grid(n, stride, causal, part):
    """``strided`` (laid out from the 2n − 1 offsets) equals the definition evaluated on every
    (i, j): A1 = |i − j| <= l, A2 = (i − j) mod l = 0, then ∩ V."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    a1, a2 = (i - j).abs() <= stride, (i - j).remainder(stride) == 0
    want = a1 if part == "A1" else a2 if part == "A2" else a1 | a2
    if causal:
        want = want & (j <= i)
    got = P.strided(n, stride, causal=causal, part=part)
    assert got.dtype == torch.bool and got.shape == (n, n)
    assert torch.equal(got, want)
