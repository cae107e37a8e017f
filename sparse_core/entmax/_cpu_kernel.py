"""The numba kernel behind :mod:`sparse_core.entmax.cpu`: exact α-entmax, one row at a time.

For each row of ``z (R, n)`` (float32 or float64; ``c = α − 1``, ``β = 1/c``, ``x = c (z − max)``):

1. One pass: the row maximum m and the maxima of 8 strided groups (``z_j, z_{j+w}, …, z_{j+7w}``,
   ``w = n // 8``, one vectorised loop per eighth of the row; rows under 128 scores: no
   groups); NaN (counted over the whole row) and +inf flagged.
2. A lower bound of τ*: Newton on ``H_q(τ) = ‖[x − τ]_+‖_q − 1`` over the group maxima in
   float64, ``q = max(1, ⌈β⌉)`` an integer ≥ β (so no exp/log), from τ = −1 until a step is
   below 1e-2 (1 + |τ|) (every iterate is a bound; a tighter one only trims a few candidates:
   the step after that one would move it ~1e-4), less a
   margin of 1e-9 (1 + |τ|). G only grows when scores are added and ``‖y‖_q ≤ ‖y‖_β`` for
   q ≥ β, so this is at most τ*; H_q is convex and decreasing, so Newton from the left never
   passes its root (sparse_core/entmax/, ``_subset_tau``).
3. The candidates ``{z > t}``, t the bound in score units (for float32 rows rounded down to
   float32: the same set as comparing in float64), read only from the groups whose maximum
   exceeds t (every score when more than half of the groups do: packed, ``_compact``; all of
   them, unpacked, when ``DENSE`` of the row pass for an integer β, 4/5 otherwise), in index
   order; their float64 x gathered into per-call buffers (a few percent of the row at α ≥ 1.5).
4. Exact phase on the candidates, float64 (``_exact_phase`` of sparse_core/entmax/). One candidate
   (the maximum alone; a third of the rows at α 1.75 on real text): τ = −1, p = 1 there. β ∈ {1, 2}
   (α = 2, 1.5): the closed form on ``S = {x > τ}`` repeated until S is stable (sums in index
   order: the torch compact path's τ bit for bit when both reach the same S); an integer β
   from 3 to 10 and 20: safeguarded Halley steps on ``‖[x − τ]_+‖_β − 1`` until a step is below
   1e-6 (``_halley``, unrolled products in one loop); other β: Newton on
   ``H_β`` until a step is below 1e-6, then one more (for a non-integer β the powers of the
   candidates as exp((β − 1) log y), four lanes at a time when the caller hands in the vector log
   and exp, ``vmath``; libm's one at a time otherwise; where β's fraction is 1/2, 1/3 or 2/3
   (α 1.6, 1.75 on the slider) a square or cube root and products instead, inline
   (:func:`_root_pow`); the steps above 1e-4 first with float32 powers, eight lanes at a time,
   when the caller hands in the float32 log and exp (:func:`_far_step`); other integer β by binary
   exponentiation, a vectorisable pass per squaring). A τ below the bound (a support entry
   could be missing; never observed) redoes the row with every finite score as a candidate.
4′. A non-integer β > 2 (α < 1.5 between the integer-β ones: 1.15, 1.3, 1.35, 1.45, …) with the
   vector log and exp at hand: one float64 pass of powers instead of Newton's two and the
   output's one (:func:`_series`; docs/architecture.md, "Entmax", says why it is exact). Halley's
   steps in float32 powers (Newton's where Halley's would exceed twice it: far from τ*, where
   it can pass every score) bring τ within ~1e-8 of τ* (:func:`_far_steps`); one float64 pass
   of ``y^(β−2)`` at that τ0 gives H_β and its first two derivatives, so Halley's step to τ1
   (cubic: float64 rounding); the values at τ1 are Taylor's series about τ0 to the second
   order (relative error under 1e-14, or 1e-10 for float32 rows; entries too near τ0 for that
   are computed exactly); their sum gives one more Newton step δ, which certifies τ1 (|δ| above
   1e-10 (1 + |τ|): step 4's Newton loop runs instead, from the bound; measured at most
   1.5e-16) and moves it to τ = τ1 + δ. Cube roots (β's fraction 1/3 or 2/3: α 1.15, 1.3)
   are inline: a float32 guess from the bits and Newton (:func:`_rcbrt32`), taken to float64
   rounding by a series, no library call (so are step 4's).
5. Output: zeros, and ``(x − τ)^β`` (float64, repeated multiplication for an integer β,
   exp(β log ·) otherwise — four lanes at a time with ``vmath`` —, then cast; 4′: the series'
   values) on the support; values below the output dtype's smallest normal number flushed to 0.
   A row taken whole (step 3) is written in one contiguous pass, without zeroing it first.

Status per row (``status``): 0 done, 1 NaN or +inf in the row (left unwritten), 2 done after
the step-4 redo, 3 did not converge (left unwritten; the caller recomputes it with torch).
Conversions to float64 are spelled ``np.float64(v)``: numba's ``float(v)`` of a float32 stays
float32 (the x of a float32 row would be rounded to float32, and the bound could pass τ*).
Compiled on first use (``cache=True``: once per machine, under ``__pycache__``); ``nogil``, so
:mod:`sparse_core.entmax.cpu` runs row ranges on several threads at once.
"""

from __future__ import annotations

import functools
import math
import platform

import numpy as np
from llvmlite import ir
from numba import carray, cfunc, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

GROUPS = 8  # _bound reads a column's eight scores in registers: it spells out eight
BOUND_MIN_N = 128
MAX_SUBSET = 60
MAX_EXACT = 50
MAX_FAR = 12
UNROLLED = 10
"""Integer β up to it, and 20 (α 1.05: the slider's integer β are 1, 2, 4, 5, 10, 20): Halley's
moments and the output in one loop of unrolled products (an addition chain: y¹⁰ in 4
products, y²⁰ in 5), which vectorises; other β by binary exponentiation passes."""
VEC_MIN = 4
"""Fewer candidates keep libm's log / exp (on the support only): measured on real rows
(bench/bench_entmax_kernel.py), 4 beat libm at every α 1.6–1.95, 1 and 8 did not."""
FAR = 1e-4
"""Newton's float32 far steps stop below FAR (1 + |τ|): from there two float64 steps end it
(measured on real rows, α 1.15–1.9: 2.4–2.7 far steps, then always 2 float64 ones)."""


FAR_H = 1e-3
"""Halley's float32 far steps (:func:`_far_steps`) stop below FAR_H (1 + |τ|): cubic, so τ is
then within float32's reach of τ* (~1e-8; measured on real rows at α 1.15–1.45: 2.0 steps)."""
SERIES_TOL = 1e-14
"""The Taylor series' dropped term, relative, where :func:`_series` uses it (float64 rows; else
exact powers)."""
SERIES_TOL32 = 1e-10
"""The same for float32 rows: their values are rounded to 6e-8, so this moves one by at most a
float32 ulp (measured: 2 ms less a layer set at α 1.15 than 1e-12, fewer entries redone)."""
SERIES_CHECK = 1e-10
"""The Newton step that certifies :func:`_series`, relative to 1 + |τ|: larger, Newton's loop
(measured on real rows: the step is at most 1.5e-16)."""


FAST = {"reassoc", "contract", "nsz", "arcp"}
"""Reassociated sums (SIMD) where a result's last bits do not matter: the bound (a margin of
1e-9 covers them) and Newton's steps (converged to ~1e-16 either way). Not "nnan"/"ninf":
masked scores are −inf."""


def _vector_call(lanes, llvm_item):
    """An intrinsic ``f(fn, src, dst, start)``: ``dst[start : start + lanes] ←
    f(src[start : start + lanes])`` by the vector function at address ``fn``
    (``<lanes x item> f(<lanes x item>)``: SLEEF's ``logd4`` / ``expd4`` / ``logf8`` / ``expf8``
    that torch links, :mod:`sparse_core.entmax.cpu`). The address is a run-time argument, so
    nothing in the cached machine code names a symbol of another library."""

    @intrinsic
    def call(typingctx, fn, src, dst, start):
        def codegen(context, builder, signature, args):
            fn_v, src_v, dst_v, start_v = args
            vt = ir.VectorType(llvm_item, lanes)
            ftype = ir.FunctionType(vt, [vt])
            a = context.make_array(signature.args[1])(context, builder, src_v)
            b = context.make_array(signature.args[2])(context, builder, dst_v)
            at = builder.bitcast(builder.gep(a.data, [start_v]), vt.as_pointer())
            r = builder.call(
                builder.inttoptr(fn_v, ftype.as_pointer()), [builder.load(at, align=4)]
            )
            to = builder.bitcast(builder.gep(b.data, [start_v]), vt.as_pointer())
            builder.store(r, to, align=4)
            return context.get_dummy_value()

        return types.void(types.int64, src, dst, types.intp), codegen

    return call


_vcall4 = _vector_call(4, ir.DoubleType())
_vcall8f = _vector_call(8, ir.FloatType())


@njit(nogil=True, cache=True, fastmath=FAST)
def _vpow32(ds, ps, kk, e, vmath):
    """float32 ``ps[:kk] ← ds[:kk] ** e`` (ds ≥ 0) eight lanes at a time by SLEEF's float32 log
    and exp (``vmath[2]``, ``vmath[3]``); kk a multiple of 8. For Newton's far steps only."""
    for j in range(0, kk, 8):
        _vcall8f(vmath[2], ds, ps, j)
    ef = np.float32(e)
    for j in range(kk):
        ps[j] *= ef
    for j in range(0, kk, 8):
        _vcall8f(vmath[3], ps, ps, j)


@njit(nogil=True, cache=True, fastmath=FAST)
def _far_step(xs, k, tau, beta, rt, s32, vmath):
    """A Newton step on H_β with the moments in float32 powers (sums in float64): ~1e-6
    relative, enough while τ is far from τ* (:func:`_newton_passes`)."""
    ds, ps = s32[0], s32[1]
    kk = (k + 7) & ~7
    _clamped(xs, k, tau, ds, kk)
    a = int(math.floor(beta - 1.0))
    if rt != 0 and a < 16:
        _root32(ds, ps, kk, a, rt)
    else:
        _vpow32(ds, ps, kk, beta - 1.0, vmath)
    g1 = 0.0
    g = 0.0
    for j in range(kk):
        p = np.float64(ps[j])
        g1 += p
        g += p * np.float64(ds[j])
    if not g1 > 0.0:
        return 0.0
    return (g - g ** (1.0 - 1.0 / beta)) / g1


ICBRT_MAGIC = np.int32(0x54A21D2A)
"""The bits of a float32 first guess of y^(−1/3): MAGIC − bits(y) / 3 (a few % off)."""
TINY32 = np.float32(np.finfo(np.float32).tiny)


@intrinsic
def _f32_bits(typingctx, x):
    """The int32 bits of the float32 ``x`` (an LLVM bitcast: free, and it vectorises)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(x), codegen


@intrinsic
def _bits_f32(typingctx, bits):
    """The float32 whose bits are the int32 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(bits), codegen


@njit(inline="always", fastmath=FAST)
def _rcbrt32(y):
    """float32 y^(−1/3) to ~2e-7 relative: the bit-level first guess, then three Newton steps
    w ← w (4 − y w³) / 3 (no division; quadratic). y under float32's smallest normal number is
    taken as it. Inline, so a loop of it vectorises."""
    y = y if y > TINY32 else TINY32
    w = _bits_f32(
        np.int32(ICBRT_MAGIC + np.int32(np.float32(_f32_bits(y)) * np.float32(-1.0 / 3.0)))
    )
    c43 = np.float32(4.0 / 3.0)
    c13 = np.float32(1.0 / 3.0)
    w = w * (c43 - c13 * y * w * w * w)
    w = w * (c43 - c13 * y * w * w * w)
    return w * (c43 - c13 * y * w * w * w)


@njit(nogil=True, cache=True, fastmath=FAST)
def _icbrt32(f32, w32, kk):
    """float32 ``w32[:kk] ← f32[:kk]^(−1/3)`` (:func:`_rcbrt32`: no library call)."""
    for j in range(kk):
        w32[j] = _rcbrt32(f32[j])


@njit(nogil=True, cache=True, fastmath=FAST)
def _root32(ds, ps, kk, a, rt):
    """float32 ``ps[:kk] ← ds[:kk]^(a + f)`` for f = 1/2 (``rt`` 2), 1/3 (3) or 2/3 (4), a < 16,
    without a call: ``sqrt``, or :func:`_icbrt32`'s y^(−1/3) as y w² or y w, then products."""
    one = np.float32(1.0)
    a1, a2, a4, a8 = a & 1 != 0, a & 2 != 0, a & 4 != 0, a & 8 != 0
    if rt == 2:
        for j in range(kk):
            ps[j] = np.float32(math.sqrt(ds[j]))
    elif rt == 3:
        for j in range(kk):
            y = ds[j]
            w = _rcbrt32(y)
            ps[j] = y * (w * w)
    else:
        for j in range(kk):
            y = ds[j]
            ps[j] = y * _rcbrt32(y)
    if a != 0:
        for j in range(kk):
            ps[j] *= _small_pow(ds[j], a1, a2, a4, a8, one)


@njit(inline="always")
def _small_pow(d, a1, a2, a4, a8, one):
    """``d^a`` for a = a1 + 2 a2 + 4 a4 + 8 a8 (flags fixed over a loop, so it vectorises)."""
    d2 = d * d
    d4 = d2 * d2
    p = d if a1 else one
    if a2:
        p *= d2
    if a4:
        p *= d4
    if a8:
        p *= d4 * d4
    return p


@njit(nogil=True, cache=True, fastmath=FAST)
def _far_halley(xs, k, tau, beta, rt, s32, vmath):
    """A Halley step on H_β with the moments from float32 powers ``y^(β−2)`` (β > 2; sums in
    float64): an inline cube root (:func:`_icbrt32`) or a square root, times products, where
    β's fraction allows (``rt``), else SLEEF's float32 log and exp. Only brings τ near τ*
    (:func:`_series` ends it)."""
    ds, ps = s32[0], s32[1]
    kk = (k + 7) & ~7
    _clamped(xs, k, tau, ds, kk)
    em = beta - 2.0
    a = int(math.floor(em))
    one = np.float32(1.0)
    if rt != 0 and a < 16:
        a1, a2, a4, a8 = a & 1 != 0, a & 2 != 0, a & 4 != 0, a & 8 != 0
        if rt == 2:
            for j in range(kk):
                ps[j] = np.float32(math.sqrt(ds[j]))
        else:
            _icbrt32(ds, ps, kk)
            for j in range(kk):  # y^(1/3) = y w², y^(2/3) = y w
                w = ps[j]
                ps[j] = ds[j] * (w if rt == 4 else w * w)
        m2 = 0.0
        m1 = 0.0
        m0 = 0.0
        for j in range(kk):
            d = ds[j]
            p = np.float64(ps[j] * _small_pow(d, a1, a2, a4, a8, one))
            d64 = np.float64(d)
            b = p * d64
            m2 += p
            m1 += b
            m0 += b * d64
    else:
        _vpow32(ds, ps, kk, em, vmath)
        m2 = 0.0
        m1 = 0.0
        m0 = 0.0
        for j in range(kk):
            p = np.float64(ps[j])
            d = np.float64(ds[j])
            b = p * d
            m2 += p
            m1 += b
            m0 += b * d
    if not m1 > 0.0:
        return 0.0
    dn = (m0 - 1.0) / (beta * m1)  # Newton's step: from the left it never passes τ* (convex)
    kappa = dn * (beta - 1.0) * m2 / (2.0 * m1)
    if not kappa < 0.5:  # far from τ* Halley's step can pass it by far (1 / (1 − κ) ≥ 2)
        return dn
    return dn / (1.0 - kappa)


@njit(nogil=True, cache=True, fastmath=FAST)
def _series_powers(xs, k, tau0, beta, rt, scr, s32, vmath):
    """``scr[0] ← y = [x − τ0]_+``, ``scr[1] ← y^(β−2)`` in float64; returns Σ y^(β−2),
    Σ y^(β−1), Σ y^β. Where β's fraction is 1/3 or 2/3 the root is float32's y^(−1/3)
    (:func:`_icbrt32`, ~2e-7) taken to float64 rounding by three terms of the series of
    (1 − h)^(−1/3), h = 1 − y w³ (the dropped term is ~h⁴: below 1e-26), then y w or y w²
    and products — no call, all of it vectorises; where it is 1/2, ``sqrt``; otherwise the
    vector log and exp (:func:`_vpow`). y under float32's range get a rougher root: they are
    within ``lim`` of τ0, so :func:`_series` redoes them exactly."""
    ds, ps = scr[0], scr[1]
    kk = (k + 7) & ~7
    em = beta - 2.0
    a = int(math.floor(em))
    m2 = 0.0
    m1 = 0.0
    m0 = 0.0
    if rt != 0 and a < 16:
        f32, r32 = s32[0], s32[1]
        a1, a2, a4, a8 = a & 1 != 0, a & 2 != 0, a & 4 != 0, a & 8 != 0
        for j in range(k):
            d = xs[j] - tau0
            d = d if d > 0.0 else 0.0
            ds[j] = d
            f32[j] = np.float32(d)
        for j in range(k, kk):
            ds[j] = 0.0
            f32[j] = np.float32(0.0)
        if rt != 2:
            _icbrt32(f32, r32, kk)
        for j in range(kk):
            y = ds[j]
            if rt == 2:
                r = math.sqrt(y)
            else:  # float32's y^(−1/3) to float64 rounding: (1 − h)^(−1/3) by its series
                w = np.float64(r32[j])
                h = 1.0 - y * (w * w * w)
                w = w + w * h * (1.0 / 3.0 + h * (2.0 / 9.0 + h * (14.0 / 81.0)))
                r = y * w if rt == 4 else y * (w * w)
            p = r * _small_pow(y, a1, a2, a4, a8, 1.0)
            ps[j] = p
            b = p * y
            m2 += p
            m1 += b
            m0 += b * y
        return m2, m1, m0
    _clamped(xs, k, tau0, ds, kk)
    if rt != 0:
        _root_pow(ds, ps, kk, a, rt)
    else:
        _vpow(ds, ps, kk, em, vmath)
    for j in range(kk):
        p = ps[j]
        d = ds[j]
        b = p * d
        m2 += p
        m1 += b
        m0 += b * d
    return m2, m1, m0


@njit(nogil=True, cache=True, fastmath=FAST)
def _vpow(ds, ps, kk, e, vmath):
    """``ps[:kk] ← ds[:kk] ** e`` as exp(e log ·) (ds ≥ 0; 0 ↦ 0), four lanes at a time by the
    vector log and exp at ``vmath[0]`` and ``vmath[1]``; kk a multiple of 4."""
    for j in range(0, kk, 4):
        _vcall4(vmath[0], ds, ps, j)
    for j in range(kk):
        ps[j] *= e
    for j in range(0, kk, 4):
        _vcall4(vmath[1], ps, ps, j)


@njit(inline="always", cache=True)
def _ipow(d, e):
    r = 1.0
    for _ in range(e):
        r *= d
    return r


@njit(nogil=True, cache=True)
def _ipow_passes(ds, ps, bs, k, e):
    """``ps[:k] ← ds[:k] ** e`` (integer e ≥ 1) by binary exponentiation, one branch-free pass
    over the k values per squaring or product (each vectorises; a loop of e products per value
    does not): e.g. 6 passes for e = 19 (α 1.05) instead of 19 products a value. ``ps`` may be
    ``ds``; ``bs`` is scratch."""
    for j in range(k):
        bs[j] = ds[j]
    first = True
    while e > 0:
        if e & 1:
            if first:
                for j in range(k):
                    ps[j] = bs[j]
                first = False
            else:
                for j in range(k):
                    ps[j] *= bs[j]
        e >>= 1
        if e > 0:
            for j in range(k):
                bs[j] *= bs[j]


@njit(nogil=True, cache=True, fastmath=FAST)
def _root_pow(ds, ps, kk, a, rt):
    """``ps[:kk] ← ds[:kk]^(a + f)`` for f = 1/2 (``rt`` 2: ``sqrt``, an instruction), 1/3 (3) or
    2/3 (4: :func:`_rcbrt32`'s float32 y^(−1/3) refined by three terms of a series, as
    :func:`_series_powers` does: within 2e-15 (1/3) and 3.4e-15 (2/3) of the true root,
    relative, measured over [TINY32, 1]; ``np.cbrt`` below float32's normal range; inline, so
    the loop vectorises), then a products: no log or exp for the slider's β = 20/k with k = 3,
    6, 8, 12, 15 (α 1.15, 1.3, 1.4, 1.6, 1.75). ds ≥ 0; kk a multiple of 4; ``ps`` is not
    ``ds``. Against SLEEF's ``cbrtd4`` (3.5 ulps, a vector call) and far steps by float32 log
    and exp, the kernel took 6 % less time on real rows at α 1.75 (L2-resident rows, one
    thread)."""
    if rt == 2:
        for j in range(kk):
            ps[j] = math.sqrt(ds[j])
    else:
        for j in range(kk):  # float32's y^(−1/3) to float64 rounding (see _series_powers)
            y = ds[j]
            w = np.float64(_rcbrt32(np.float32(y)))
            h = 1.0 - y * (w * w * w)
            w = w + w * h * (1.0 / 3.0 + h * (2.0 / 9.0 + h * (14.0 / 81.0)))
            ps[j] = y * w if rt == 4 else y * (w * w)
        for j in range(kk):  # below float32's normal range the first guess is off: a library's
            y = ds[j]
            if y > 0.0 and y < TINY32:
                r = np.cbrt(y)
                ps[j] = r * r if rt == 4 else r
    for _ in range(a):
        for j in range(kk):
            ps[j] *= ds[j]


@njit(nogil=True, cache=True)
def _clamped(xs, k, tau, ds, kk):
    """``ds[:k] ← [xs[:k] − τ]_+`` and ``ds[k:kk] ← 0`` (the lanes past k); ``ds`` may be ``xs``,
    or float32 (the far steps': each y rounded once)."""
    for j in range(k):
        d = xs[j] - tau
        ds[j] = d if d > 0.0 else 0.0
    for j in range(k, kk):
        ds[j] = 0.0


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments_passes(xs, k, tau, e_int, e, rt, scr, vmath):
    """:func:`_moments` in passes over scratch rows: y into ``scr[0]``, y^e into ``scr[1]`` by
    a root and products (``rt`` ≠ 0: :func:`_root_pow`), the vector log / exp (e_int −1,
    ``vmath`` given) or binary exponentiation (integer e)."""
    ds, ps = scr[0], scr[1]
    kk = k if e_int >= 0 and rt == 0 else (k + 3) & ~3  # vector lanes: k rounded up to 4
    _clamped(xs, k, tau, ds, kk)
    if rt != 0:
        _root_pow(ds, ps, kk, int(math.floor(e)), rt)
    elif e_int < 0:
        _vpow(ds, ps, kk, e, vmath)
    else:
        _ipow_passes(ds, ps, scr[2], k, e_int)
    g1 = 0.0
    g = 0.0
    for j in range(kk):
        g1 += ps[j]
        g += ps[j] * ds[j]
    return g1, g


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments(xs, k, tau, e_int, e):
    """``Σ y^e`` and ``Σ y^(e+1)`` over ``y = [x − τ]_+`` of ``xs[:k]`` (e_int: the integer
    e, or −1); branch-free loops per exponent so that they vectorise."""
    g1 = 0.0
    g = 0.0
    if e_int == 0:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            g1 += 1.0 if d > 0.0 else 0.0
            g += d
    elif e_int == 1:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            g1 += d
            g += d * d
    elif e_int == 2:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            g1 += d2
            g += d2 * d
    elif e_int == 3:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d3 = d * d * d
            g1 += d3
            g += d3 * d
    elif e_int == 4:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            p = d2 * d2
            g1 += p
            g += p * d
    elif e_int == 5:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            p = d4 * d
            g1 += p
            g += p * d
    elif e_int == 6:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d3 = d2 * d
            p = d3 * d3
            g1 += p
            g += p * d
    elif e_int == 7:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d3 = d2 * d
            d6 = d3 * d3
            p = d6 * d
            g1 += p
            g += p * d
    elif e_int == 8:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            p = d4 * d4
            g1 += p
            g += p * d
    elif e_int == 9:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            d8 = d4 * d4
            p = d8 * d
            g1 += p
            g += p * d
    elif e_int == 19:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            d8 = d4 * d4
            d16 = d8 * d8
            d18 = d16 * d2
            p = d18 * d
            g1 += p
            g += p * d
    elif e_int > 0:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            dp = _ipow(d, e_int)
            g1 += dp
            g += dp * d
    else:
        for j in range(k):
            d = xs[j] - tau
            if d > 0.0:
                dp = math.exp(e * math.log(d))
                g1 += dp
                g += dp * d
    return g1, g


@njit(nogil=True, cache=True)
def _bound(z, r, sub, xsub, c, q):
    """Row maximum (−inf: fully masked; NaN: a NaN or +inf score) and a float64 lower bound of
    τ* (x units) from the group maxima ``sub`` (filled here; −1 − 1e-9 for rows under
    ``BOUND_MIN_N``)."""
    n = z.shape[1]
    row = z[r]
    m = row[0]
    if n < BOUND_MIN_N:
        bad = False
        for i in range(n):
            v = row[i]
            m = v if v > m else m
            bad |= not v < np.inf  # NaN or +inf
        return (np.nan if bad else m), -1.0 - 1e-9
    w = n // GROUPS
    # one loop over the group's columns, its eight scores in registers (it vectorises over j; a
    # pass per group through ``sub`` read and wrote it eight times: 25 ns a row more at n = 512);
    # NaN flags OR'd as booleans (counted in int64 lanes, the loop took 25 ns a row more)
    bad = False
    for j in range(w):
        s = row[j]
        nn = s != s
        v = row[w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[2 * w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[3 * w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[4 * w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[5 * w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[6 * w + j]
        s = v if v > s else s
        nn |= v != v
        v = row[7 * w + j]
        s = v if v > s else s
        nn |= v != v
        sub[j] = s
        bad |= nn
    # the maximum in four chains (one chain waits on each comparison: ~30 ns a row more at
    # n = 512); the maximum of a set, so the same value (rows with a NaN are flagged above)
    m0, m1, m2, m3 = sub[0], sub[1], sub[2], sub[3]  # w >= 16 (n >= BOUND_MIN_N)
    top = w - w % 4
    for j in range(4, top, 4):
        v = sub[j]
        m0 = v if v > m0 else m0
        v = sub[j + 1]
        m1 = v if v > m1 else m1
        v = sub[j + 2]
        m2 = v if v > m2 else m2
        v = sub[j + 3]
        m3 = v if v > m3 else m3
    for j in range(top, w):
        v = sub[j]
        m0 = v if v > m0 else m0
    m0 = m1 if m1 > m0 else m0
    m2 = m3 if m3 > m2 else m2
    m = m2 if m2 > m0 else m0
    for i in range(w * GROUPS, n):
        v = row[i]
        m = v if v > m else m
        bad |= v != v
    if bad or m == np.inf:
        return np.nan, -1.0
    if m == -np.inf:
        return m, -1.0
    m64 = np.float64(m)
    for j in range(w):
        xsub[j] = (np.float64(sub[j]) - m64) * c
    tau = -1.0
    for _ in range(MAX_SUBSET):
        g1, g = _moments(xsub, w, tau, q - 1, 0.0)
        if g1 <= 0.0:
            break
        if q == 1:
            nq = g
        elif q == 2:
            nq = math.sqrt(g)
        elif q == 4:  # α 1.25, 1.3: two roots, not libm's pow (~25 ns a call)
            nq = math.sqrt(math.sqrt(g))
        else:
            nq = g ** (1.0 / q)
        step = (nq - 1.0) * (g / nq) / g1
        if not step > 1e-2 * (1.0 + abs(tau)):  # any iterate is a lower bound; also ends a NaN step
            if step > 0.0:
                tau += step
            break
        tau += step
    return m, tau - 1e-9 * (1.0 + abs(tau))


DENSE = (1, 3)
"""A row whose candidates are at least this share of it is taken whole (:func:`_gather`): from
a third of the row on, taking every score is cheaper than packing them one at a time
(:func:`_compact_scalar`; measured on real rows, bench/bench_entmax_kernel.py: on an AVX2 CPU,
at 1/2 rather than 4/5 α 1.1 took 5–7 % less, at 1/3 rather than 1/2 α 1.2 took 3 % less). On
an AVX-512 Xeon, packing eight at a time by the register compress (``vcompresspd``) and taking
rows whole from 4/5 on took 2–11 % longer than this loop and a third (α 1.75, 1.25, 1.1), so
the kernel has no AVX-512 path."""


@njit(nogil=True, cache=True)
def _compact(row, n, m64, c, tz, xs, idx):
    """The scores of ``row[:n]`` above ``tz``, in index order: float64 x into ``xs`` and indices
    into ``idx``; returns their count. The branch-free loop (:func:`_compact_scalar`): LLVM's
    portable masked compress-store runs one lane at a time with a branch each, which made the
    kernel 10–28 % slower at α 1.1–1.35 on an AVX2 CPU (real rows,
    bench/bench_entmax_kernel.py)."""
    return _compact_scalar(row, 0, n, m64, c, tz, xs, idx, 0)


@njit(nogil=True, cache=True)
def _compact_scalar(row, lo, hi, m64, c, tz, xs, idx, k):
    """The scores of ``row[lo:hi]`` above ``tz`` appended at ``k`` one at a time (branch-free: a
    compare's outcome is unpredictable; x computed as read); returns the new count."""
    for i in range(lo, hi):
        v = row[i]
        xs[k] = (np.float64(v) - m64) * c
        idx[k] = i
        k += v > tz
    return k


@njit(nogil=True, cache=True)
def _gather(z, r, sub, m, c, floor, idx, xs, cols, dense):
    """Candidates of row r, in index order: the scores above ``t = m + floor / c`` (for float32
    scores compared with t rounded down to float32: the same set). Only the groups' columns
    whose maximum exceeds t are read (``sub`` from :func:`_bound`; every score when ``floor``
    is below −1 or the row is short). Their indices and float64 x are gathered; returns their
    count and the x bound of the others, ``(t − m) c`` (x is computed so and rounding is
    monotone: every non-candidate's x is at most it). When at least ``dense`` (a fraction,
    :data:`DENSE` or 4/5) of the row are candidates (α near 1), every score is taken, in place,
    without the compaction's serial loop: a superset of the candidates is as exact (their
    y = [x − τ]_+ is 0 at every τ from the bound on; a masked score's x is −inf), and the
    caller writes the row in one contiguous pass."""
    n = z.shape[1]
    row = z[r]
    m64 = np.float64(m)
    t = m64 + floor / c
    tz = z.dtype.type(t)
    if np.float64(tz) > t:
        tz = np.nextafter(tz, z.dtype.type(-np.inf))
    k = 0
    if n < BOUND_MIN_N or floor < -1.0:
        k = _compact_scalar(row, 0, n, m64, c, tz, xs, idx, k)
    else:
        w = n // GROUPS
        nc = 0
        for j in range(w):
            cols[nc] = j
            nc += sub[j] > tz
        if 2 * nc > w:  # many candidates (α near 1): every score
            kd = np.int32(0)
            for i in range(n):
                v = row[i]
                xs[i] = (np.float64(v) - m64) * c
                idx[i] = i
                kd += np.int32(1) if v > tz else np.int32(0)  # int32 lanes, not int64
            k = kd
            if k * dense[1] >= n * dense[0]:  # most scores: all of them, uncompacted (a superset)
                return n, (t - m64) * c
            k = _compact(row, n, m64, c, tz, xs, idx)
        else:
            for g in range(GROUPS):  # index g w + j: ascending over g, then j
                o = g * w
                for u in range(nc):
                    i = o + cols[u]
                    v = row[i]
                    xs[k] = (np.float64(v) - m64) * c
                    idx[k] = i
                    k += v > tz
            k = _compact_scalar(row, w * GROUPS, n, m64, c, tz, xs, idx, k)
    return k, (t - m64) * c


@njit(nogil=True, cache=True)
def _powers(xs, k, tau, beta, beta_int, rt, scr, vmath):
    """``xs[j] ← [xs[j] − τ]_+^β`` in place: branch-free loops, unrolled for β 1 to 4 (so they
    vectorise; :func:`_ipow_passes` for a larger integer β); otherwise exp(β log ·) by the
    vector log / exp four lanes at a time (``xs`` holds k rounded up to 4), or libm's; a root
    and products where ``rt`` says so (:func:`_root_pow`)."""
    if rt != 0 and k >= VEC_MIN:
        kk = (k + 3) & ~3
        _clamped(xs, k, tau, scr[0], kk)
        _root_pow(scr[0], xs, kk, int(math.floor(beta)), rt)
    elif beta_int < 0 and vmath[0] != 0 and k >= VEC_MIN:
        kk = (k + 3) & ~3
        _clamped(xs, k, tau, xs, kk)
        _vpow(xs, xs, kk, beta, vmath)
    elif beta_int == 1:
        for j in range(k):
            d = xs[j] - tau
            xs[j] = d if d > 0.0 else 0.0
    elif beta_int == 2:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            xs[j] = d * d
    elif beta_int == 3:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            xs[j] = d * d * d
    elif beta_int == 4:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            xs[j] = d * d * d * d
    elif beta_int == 5:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            p = d4 * d
            xs[j] = p
    elif beta_int == 6:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d3 = d2 * d
            p = d3 * d3
            xs[j] = p
    elif beta_int == 7:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d3 = d2 * d
            d6 = d3 * d3
            p = d6 * d
            xs[j] = p
    elif beta_int == 8:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            p = d4 * d4
            xs[j] = p
    elif beta_int == 9:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            d8 = d4 * d4
            p = d8 * d
            xs[j] = p
    elif beta_int == 10:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            d5 = d4 * d
            p = d5 * d5
            xs[j] = p
    elif beta_int == 20:
        for j in range(k):
            d = xs[j] - tau
            d = d if d > 0.0 else 0.0
            d2 = d * d
            d4 = d2 * d2
            d5 = d4 * d
            d10 = d5 * d5
            xs[j] = d10 * d10
    elif beta_int > 0:
        _clamped(xs, k, tau, xs, k)
        _ipow_passes(xs, xs, scr[2], k, beta_int)
    else:
        for j in range(k):
            d = xs[j] - tau
            xs[j] = math.exp(beta * math.log(d)) if d > 0.0 else 0.0


@njit(nogil=True, cache=True)
def _closed(xs, k, tau, beta_int):
    """Closed-form τ on S = {x > τ} until S is stable (β = 2: α 1.5; β = 1: α 2); the
    torch compact path's ``_closed_form`` with the same sums in the same order."""
    for _ in range(MAX_EXACT):
        cnt = 0.0
        s1 = 0.0
        s2 = 0.0
        for j in range(k):
            x = xs[j]
            if x > tau:
                cnt += 1.0
                s1 += x
                s2 += x * x
        if cnt == 0.0:
            return tau, True
        kk = cnt
        mean = s1 / kk
        if beta_int == 2:
            v = 1.0 / kk - (s2 / kk - mean * mean)
            new = mean - math.sqrt(v if v > 0.0 else 0.0)
        else:
            new = (s1 - 1.0) / kk
        same = True
        for j in range(k):
            if (xs[j] > tau) != (xs[j] > new):
                same = False
                break
        tau = new
        if same:
            return tau, True
    return tau, False


@njit(nogil=True, cache=True)
def _newton_step(xs, k, tau, beta, beta_int):
    g1, g = _moments(xs, k, tau, beta_int - 1 if beta_int >= 1 else -1, beta - 1.0)
    if not g1 > 0.0:
        return 0.0
    return (g - g ** (1.0 - 1.0 / beta)) / g1


@njit(nogil=True, cache=True)
def _newton(xs, k, tau, beta, beta_int):
    """Newton on H_β until a step is below 1e-6, then one more (quadratic convergence)."""
    for _ in range(MAX_EXACT):
        step = _newton_step(xs, k, tau, beta, beta_int)
        tau += step
        if not abs(step) > 1e-6:
            return tau + _newton_step(xs, k, tau, beta, beta_int), True
    return tau, False


@njit(inline="always", fastmath=FAST)
def _moments3_loop(xs, k, tau, a1, a2, a4, a8, a16):
    """:func:`_moments3`'s pass for ``e = a1 + 2 a2 + 4 a4 + 8 a8 + 16 a16``."""
    m2 = 0.0
    m1 = 0.0
    m0 = 0.0
    for j in range(k):
        d = xs[j] - tau
        d = d if d > 0.0 else 0.0
        p = _small_pow(d, a1, a2, a4, a8, 1.0)
        if a16:
            d8 = d * d
            d8 *= d8
            d8 *= d8
            p *= d8 * d8
        b = p * d
        m2 += p
        m1 += b
        m0 += b * d
    return m2, m1, m0


# The slider's integer β from 3 on (α 1.05, 1.1, 1.2, 1.25: e = β − 2 = 18, 8, 3, 2), each
# compiled with its flags constant: the loop then holds only its own products (with the flags
# read at run time the kernel took ~2 % longer on real rows at α 1.1).


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments3_8(xs, k, tau):
    return _moments3_loop(xs, k, tau, False, False, False, True, False)


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments3_2(xs, k, tau):
    return _moments3_loop(xs, k, tau, False, True, False, False, False)


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments3_3(xs, k, tau):
    return _moments3_loop(xs, k, tau, True, True, False, False, False)


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments3_18(xs, k, tau):
    return _moments3_loop(xs, k, tau, False, True, False, False, True)


@njit(nogil=True, cache=True, fastmath=FAST)
def _moments3(xs, k, tau, e):
    """``Σ y^e``, ``Σ y^(e+1)`` and ``Σ y^(e+2)`` over ``y = [x − τ]_+`` of ``xs[:k]`` for an
    integer ``1 ≤ e < 32``: y^e by products (:func:`_small_pow`'s flags, fixed over the loop, so
    it vectorises; the slider's e each in a loop of its own)."""
    if e == 8:
        return _moments3_8(xs, k, tau)
    if e == 2:
        return _moments3_2(xs, k, tau)
    if e == 3:
        return _moments3_3(xs, k, tau)
    if e == 18:
        return _moments3_18(xs, k, tau)
    a1, a2, a4, a8, a16 = e & 1 != 0, e & 2 != 0, e & 4 != 0, e & 8 != 0, e & 16 != 0
    return _moments3_loop(xs, k, tau, a1, a2, a4, a8, a16)


@njit(nogil=True, cache=True)
def _halley(xs, k, tau, beta, beta_int):
    """τ for an integer β ≥ 3 (α 1.05 … 1.3̄): safeguarded Halley steps on the norm
    ``F(τ) = ‖[x − τ]_+‖_β − 1`` from the bound, until a step is below 1e-6 (cubic convergence:
    the error left is of the order of that step's cube); the torch dense path's step
    (``sparse_core.entmax._halley_step``), one row at a time.

    One pass gives G = Σ y^β, m1 = Σ y^(β−1) and m2 = Σ y^(β−2) (:func:`_moments3`). Newton's
    step is ``dn = (G − G^(1−1/β)) / m1``; Halley's ``dn / (1 − κ)`` with
    ``κ = dn (β − 1)(m2 − m1² / G) / (2 m1)``. F is convex, so Newton's step never passes τ*
    (the lower limit); every ``y − s ≤ y (1 − s / y_max)`` gives ``G(τ + s) ≤ G (1 − s /
    y_max)^β``, so τ* − τ ≤ y_max (1 − G^(−1/β)) ≤ −τ (1 − G^(−1/β)) (max x = 0: the upper
    limit; for τ ≥ −1 it is tighter than the torch path's (G − 1) / β, and it holds from any
    start). The step taken is Halley's clamped between the two. Measured on real rows (α 1.05,
    1.1, 1.25): 2.0–2.3 passes a row, where Newton's loop took 3.4–3.7."""
    c = 1.0 / beta
    for _ in range(MAX_EXACT):
        m2, m1, g = _moments3(xs, k, tau, beta_int - 2)
        if not m1 > 0.0:
            return tau, True
        dn = (g - g ** (1.0 - c)) / m1
        kappa = dn * (beta - 1.0) * (m2 - m1 * m1 / g) / (2.0 * m1)
        step = dn / (1.0 - kappa) if kappa < 1.0 else np.inf
        upper = dn * m1 * -tau / g if g > 1.0 else 0.0  # −τ (1 − G^(−1/β)): see the docstring
        step = max(min(step, upper), dn)
        tau += step
        if not abs(step) > 1e-6:
            return tau, True
    return tau, False


@njit(nogil=True, cache=True)
def _pass_step(xs, k, tau, beta, beta_int, rt, scr, vmath):
    g1, g = _moments_passes(xs, k, tau, beta_int - 1, beta - 1.0, rt, scr, vmath)
    if not g1 > 0.0:
        return 0.0
    return (g - g ** (1.0 - 1.0 / beta)) / g1


@njit(nogil=True, cache=True)
def _far_steps(xs, k, tau, beta, rt, s32, vmath, halley):
    """Far steps in float32 powers, at most ``MAX_FAR``: Newton's (:func:`_far_step`) until one is
    below ``FAR`` (1 + |τ|), or Halley's (:func:`_far_halley`, ``halley``) until one is below
    ``FAR_H`` (1 + |τ|), from where τ is within ~1e-8 of τ*. They only bring τ near τ*."""
    stop = FAR_H if halley else FAR
    for _ in range(MAX_FAR):
        if halley:
            step = _far_halley(xs, k, tau, beta, rt, s32, vmath)
        else:
            step = _far_step(xs, k, tau, beta, rt, s32, vmath)
        if not step > 0.0:  # also a NaN step
            break
        tau += step
        if step < stop * (1.0 + abs(tau)):
            break
    return tau


@njit(nogil=True, cache=True)
def _newton_passes(xs, k, tau, beta, beta_int, rt, scr, s32, vmath, far):
    """:func:`_newton` with the moments in passes (:func:`_moments_passes`: an integer β ≥ 5, or
    a non-integer β with the vector log / exp); for a non-integer β with SLEEF's float32 ones,
    the steps above ``FAR`` first in float32 powers (``far``: :func:`_far_steps`). (A separate
    function: the plain one's calls stay lean.)"""
    if far and beta_int < 0 and vmath[2] != 0:
        tau = _far_steps(xs, k, tau, beta, rt, s32, vmath, False)
    for _ in range(MAX_EXACT):
        step = _pass_step(xs, k, tau, beta, beta_int, rt, scr, vmath)
        tau += step
        if not abs(step) > 1e-6:
            return tau + _pass_step(xs, k, tau, beta, beta_int, rt, scr, vmath), True
    return tau, False


@njit(nogil=True, cache=True)
def _exact_pow(d, e):
    return math.exp(e * math.log(d)) if d > 0.0 else 0.0


@njit(nogil=True, cache=True, fastmath=FAST)
def _series(z, out, r, xs, idx, k, tau0, beta, rt, scr, s32, vmath, tiny, reach):
    """Row r's τ and output from one float64 pass of powers at τ0 (near τ*: after the far steps):
    τ by Halley's step, the support's values by Taylor's series about τ0, certified by a Newton
    step on them.

    ``a_j = y_j^(β−2)`` (y = [x − τ0]_+; β > 2, so no pole; :func:`_series_powers`) gives
    ``Σ y^β``, ``Σ y^(β−1)`` and ``Σ y^(β−2)``: H_β, −H_β′/β and H_β″/(β(β−1)) at τ0, hence
    Halley's step e to τ1 (cubic: from the far steps' ~1e-8, to float64 rounding). Each value at
    τ1 is then ``(y − e)^β = y^β − β e y^(β−1) + C2 e² y^(β−2)``, whose next term is C3 (e / y)³
    relative: below ``SERIES_TOL`` (``SERIES_TOL32`` for float32 rows) wherever
    ``y ≥ reach |e|`` (``reach = (|C3| / tol)^(1/3)``, from the caller); the others (within
    reach |e| of τ0, or between τ1 and τ0) are computed exactly. Their sum s and
    ``Σ (y − e)^(β−1)`` give the Newton step δ = (s − 1) / (β Σ (y − e)^(β−1)) that certifies
    τ1: |δ| above ``SERIES_CHECK`` (1 + |τ|) means the pass cannot stand in for Newton's loop,
    and NaN is returned (the caller runs that loop and rewrites the row). Otherwise the values,
    moved by δ to first order where |δ| is above float64 rounding, are written to row r of
    ``out`` (zeroed by the caller) and τ = τ1 + δ is returned: its support is {x > τ} (entries
    between τ1 and τ, if any, are redone exactly)."""
    m2, m1, m0 = _series_powers(xs, k, tau0, beta, rt, scr, s32, vmath)
    if not (m1 > 0.0 and m0 < np.inf and m2 < np.inf):
        return np.nan
    dn = (m0 - 1.0) / (beta * m1)
    e = dn / (1.0 - dn * (beta - 1.0) * m2 / (2.0 * m1))
    if not abs(e) < 1e-3:
        return np.nan
    ds, ps = scr[0], scr[1]
    tau1 = tau0 + e
    c1 = beta * e
    c2 = 0.5 * beta * (beta - 1.0) * e * e
    f1 = (beta - 1.0) * e
    lim = abs(e) * reach
    s = 0.0
    s1 = 0.0
    bad = 0
    for j in range(k):  # branch-free: it vectorises
        a = ps[j]
        d = ds[j]
        b = a * d
        p = b * d - c1 * b + c2 * a
        q = b - f1 * a
        y1 = xs[j] - tau1
        inside = y1 > 0.0
        p = p if inside else 0.0
        q = q if inside else 0.0
        bad += inside & (d < lim)
        ds[j] = p
        ps[j] = q
        s += p
        s1 += q
    if bad:
        for j in range(k):
            y1 = xs[j] - tau1
            if y1 > 0.0 and xs[j] - tau0 < lim:
                s -= ds[j]
                s1 -= ps[j]
                q = _exact_pow(y1, beta - 1.0)
                ds[j] = q * y1
                ps[j] = q
                s += q * y1
                s1 += q
    if not s1 > 0.0:
        return np.nan
    delta = (s - 1.0) / (beta * s1)
    tau = tau1 + delta
    if not abs(delta) <= SERIES_CHECK * (1.0 + abs(tau)):
        return np.nan
    if abs(delta) > 1e-15 * (1.0 + abs(tau)):  # the values too, to first order
        cd = beta * delta
        for j in range(k):
            ds[j] -= cd * ps[j]
    for j in range(k):
        p = ds[j]
        out[r, idx[j]] = p if p >= tiny else 0.0
    lo = min(delta, 0.0)
    hi = max(delta, 0.0)
    moved = 0  # entries between τ1 and τ: their side of the threshold changed
    for j in range(k):
        y1 = xs[j] - tau1
        moved += (y1 > lo) & (y1 <= hi)
    if moved:
        for j in range(k):
            y = xs[j] - tau
            p = _exact_pow(y, beta) if y > 0.0 else 0.0
            out[r, idx[j]] = p if p >= tiny else 0.0
    return tau


_X86 = platform.machine().lower() in ("x86_64", "amd64")


def _mxcsr_call(builder, name, slot):
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p]), name)
    builder.call(fn, [builder.bitcast(slot, i8p)])


@intrinsic
def _mxcsr_or(typingctx, bits):
    """ORs ``bits`` into this thread's MXCSR (x86's SSE/AVX control and status register) and
    returns its old value; elsewhere than x86-64, sets nothing and returns 0 (the ``ftz`` fast
    path, :mod:`sparse_core.entmax._denormals`)."""

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        if not _X86:
            return ir.Constant(i64, 0)
        slot = cgutils.alloca_once(builder, i32)
        _mxcsr_call(builder, "llvm.x86.sse.stmxcsr", slot)
        old = builder.load(slot)
        builder.store(builder.or_(old, builder.trunc(args[0], i32)), slot)
        _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", slot)
        return builder.zext(old, i64)

    return types.int64(types.int64), codegen


@intrinsic
def _mxcsr_set(typingctx, value):
    """Sets this thread's MXCSR to ``value`` (x86-64; elsewhere nothing)."""

    def codegen(context, builder, signature, args):
        if _X86:
            i32 = ir.IntType(32)
            slot = cgutils.alloca_once(builder, i32)
            builder.store(builder.trunc(args[0], i32), slot)
            _mxcsr_call(builder, "llvm.x86.sse.ldmxcsr", slot)
        return context.get_dummy_value()

    return types.void(types.int64), codegen


@njit(nogil=True, cache=True)
def thread_mxcsr():
    """This thread's MXCSR (0 elsewhere than x86-64): the tests check the kernel restores it."""
    return _mxcsr_or(0)


@intrinsic
def _stream64(typingctx, dst, j, src):
    """``dst[j : j + 64 / itemsize] ← src[j : …]`` as one 64-byte store marked nontemporal
    (LLVM's ``!nontemporal``: x86's streaming stores, which bypass the cache and do not read
    the line first); ``dst``'s address at j must be a multiple of 64. 1-d arrays of one dtype."""
    item = dst.dtype
    llvm_item = ir.FloatType() if item == types.float32 else ir.DoubleType()
    lanes = 64 // (4 if item == types.float32 else 8)

    def codegen(context, builder, signature, args):
        d_v, j_v, s_v = args
        vt = ir.VectorType(llvm_item, lanes)
        d = context.make_array(signature.args[0])(context, builder, d_v)
        s_ = context.make_array(signature.args[2])(context, builder, s_v)
        v = builder.load(builder.bitcast(builder.gep(s_.data, [j_v]), vt.as_pointer()), align=4)
        to = builder.bitcast(builder.gep(d.data, [j_v]), vt.as_pointer())
        st = builder.store(v, to, align=64)
        st.set_metadata("nontemporal", builder.module.add_metadata([ir.IntType(32)(1)]))
        return context.get_dummy_value()

    return types.void(dst, types.intp, src), codegen


@intrinsic
def _store_fence(typingctx):
    """A full memory fence: streaming stores are weakly ordered, and this orders them before
    whatever the thread does next (x86: ``mfence``)."""

    def codegen(context, builder, signature, args):
        builder.fence("seq_cst")
        return context.get_dummy_value()

    return types.void(), codegen


@njit(nogil=True, cache=True)
def _stream_row(out, copy, r):
    """``copy[r] ← out[r]`` (just written: in cache), 64 bytes at a time by streaming stores
    (:func:`_stream64`) from the first 64-byte boundary of ``copy[r]``, the ends by plain
    ones. A whole row at once: the same stores spread over the next row's steps (a third at
    each) made the kernel 1.25x slower in ``model.run`` at α 1.1 (they hold the core's fill
    buffers while that row's loads need them)."""
    n = out.shape[1]
    size = out.itemsize
    lanes = 64 // size
    dst = copy[r]
    src = out[r]
    head = ((-dst.ctypes.data) % 64) // size
    if head > n:
        head = n
    for j in range(head):
        dst[j] = src[j]
    body = head + (n - head) // lanes * lanes
    for j in range(head, body, lanes):
        _stream64(dst, j, src)
    for j in range(body, n):
        dst[j] = src[j]


@njit(nogil=True, cache=True)
def solve_rows(z, out, alpha, tiny, r0, r1, status, vmath, copy):
    """α-entmax of rows ``r0 … r1 − 1`` of ``z`` into ``out`` (module docstring); ``vmath``: the
    addresses of a 4-lane float64 log and exp and an 8-lane float32 log and exp (int64 (4,),
    :func:`_vector_call`; a zero for none: libm's, no float32 far steps, no series), then
    optionally the MXCSR bits to set on this thread while the rows run (``vmath[4]``:
    flush-to-zero and denormals-are-zero, :mod:`._denormals`; 0 or absent: none), restored at
    the end. ``copy``: (R, n) of the dtype of ``out``, or (0, n) for none: each row written to
    ``out`` is also written there, by streaming stores (:func:`_stream_row`: a recording that is
    not read back soon takes no cache lines and no reads of its own; ``out`` then stays a
    scratch in cache for what reads P next). ``out`` may be ``z`` itself (in place): every row
    is read before it is written (the series path keeps a copy of its row for the redo)."""
    bits = vmath[4] if vmath.shape[0] > 4 else 0
    streaming = copy.shape[0] > 0
    in_place = out.ctypes.data == z.ctypes.data
    mxcsr = _mxcsr_or(bits) if bits != 0 else 0
    n = z.shape[1]
    c = alpha - 1.0
    beta = 1.0 / c
    near = round(beta)
    beta_int = int(near) if abs(beta - near) < 1e-9 and near <= 64 else -1
    q = beta_int if beta_int >= 1 else int(math.ceil(beta - 1e-9))  # >= 1: α <= 2
    closed = beta_int == 1 or beta_int == 2
    frac = beta - math.floor(beta)
    rt = 0  # β's fraction 1/2, 1/3 or 2/3: a root instead of log and exp (_root_pow)
    if beta_int < 0:
        if abs(frac - 0.5) < 1e-12:
            rt = 2
        elif abs(frac - 1.0 / 3.0) < 1e-12:
            rt = 3
        elif abs(frac - 2.0 / 3.0) < 1e-12:
            rt = 4
    far = beta_int < 0 and vmath[2] != 0 and (vmath[0] != 0 or rt != 0)
    series_ok = far and beta > 2.0 + 1e-9
    # the series' reach: y ≥ reach |e| keeps its dropped term C3 (e / y)³ under the tolerance
    c3 = abs(beta * (beta - 1.0) * (beta - 2.0) / 6.0)
    reach = (c3 / (SERIES_TOL32 if z.itemsize == 4 else SERIES_TOL)) ** (1.0 / 3.0)
    # every score taken from this share of candidates on: integer β (cheap passes) at DENSE,
    # others (their passes cost a power each) at 4/5
    dense = DENSE if beta_int >= 1 else (4, 5)
    sub = np.empty(max(1, n // GROUPS), dtype=z.dtype)
    xsub = np.empty(max(1, n // GROUPS), dtype=np.float64)
    cols = np.empty(max(1, n // GROUPS), dtype=np.int32)
    idx = np.empty(n + 8, dtype=np.int32)  # to spare: _compact_scalar writes one past k
    xs = np.empty(n + 8, dtype=np.float64)  # k rounded up to 8 lanes
    scr = np.empty((3, n + 8), dtype=np.float64)  # y, its powers, squarings (_moments)
    s32 = np.empty((2, n + 8), dtype=np.float32)  # float32 y and powers (_far_step, _icbrt32)
    kept = np.empty((1, n), dtype=z.dtype)  # the series path's row, when out is z
    for r in range(r0, r1):
        m, floor = _bound(z, r, sub, xsub, c, q)
        if m != m:  # a NaN or +inf score
            status[r] = 1
            continue
        if m == -np.inf:  # fully masked: zeros
            out[r, :] = 0.0
            status[r] = 0
            if streaming:
                _stream_row(out, copy, r)
            continue
        state = 0
        zr, rr, saved = z, r, False  # the row the candidates are read from
        for _attempt in range(2):
            k, floor = _gather(zr, rr, sub, m, c, floor, idx, xs, cols, dense)
            written = False
            if k == 1:  # the maximum alone: x = 0 and τ = −1, exactly, at every α
                tau, ok = xs[0] - 1.0, True
            elif closed:
                tau, ok = _closed(xs, k, floor, beta_int)
            elif series_ok and k >= VEC_MIN:
                tau = _far_steps(xs, k, floor, beta, rt, s32, vmath, True)
                if in_place and not saved:  # out[r] is written next; a redo reads the row again
                    kept[0, :] = z[r, :]
                    zr, rr, saved = kept, 0, True
                if k < n:  # k = n: every column is written
                    out[r, :] = 0.0
                tau2 = _series(z, out, r, xs, idx, k, tau, beta, rt, scr, s32, vmath, tiny, reach)
                if tau2 == tau2:
                    tau, ok, written = tau2, True, True
                else:  # Newton's loop as before the series, from the bound (left of τ*)
                    tau, ok = _newton_passes(
                        xs, k, floor, beta, beta_int, rt, scr, s32, vmath, True
                    )
            elif (beta_int > UNROLLED and beta_int != 20) or (
                beta_int < 0 and (vmath[0] != 0 or rt != 0) and k >= VEC_MIN
            ):
                tau, ok = _newton_passes(xs, k, floor, beta, beta_int, rt, scr, s32, vmath, True)
            elif beta_int >= 3:
                tau, ok = _halley(xs, k, floor, beta, beta_int)
            else:
                tau, ok = _newton(xs, k, floor, beta, beta_int)
            if not ok:
                state = 3
                break
            if tau >= floor:
                break
            floor = -1.0 - 1e-9  # the always-safe candidate set {x > −1}
            state = 2
        else:
            state = 3
        status[r] = state
        if state == 3:  # left for the caller's redo, which reads the row: as it was
            if saved:
                z[r, :] = kept[0, :]
            continue
        if written:
            pass
        elif k == 1:  # p = 1 at the maximum (no power: 1^β is 1)
            out[r, :] = 0.0
            out[r, idx[0]] = 1.0
        else:
            _write(xs, k, tau, beta, beta_int, rt, scr, vmath, out, r, idx, tiny)
        if streaming:
            _stream_row(out, copy, r)
    if streaming:
        _store_fence()
    if bits != 0:
        _mxcsr_set(mxcsr)


@njit(inline="always")
def _whole_pass(xs, n, tau, out, r, tiny, b):
    for j in range(n):
        d = xs[j] - tau
        d = d if d > 0.0 else 0.0
        if b == 4:
            p = d * d * d * d
        elif b == 5:
            d2 = d * d
            d4 = d2 * d2
            p = d4 * d
        elif b == 10:
            d2 = d * d
            d4 = d2 * d2
            d5 = d4 * d
            p = d5 * d5
        else:  # 20
            d2 = d * d
            d4 = d2 * d2
            d5 = d4 * d
            d10 = d5 * d5
            p = d10 * d10
        out[r, j] = p if p >= tiny else 0.0


@njit(nogil=True, cache=True)
def _write_whole(xs, n, tau, b, out, r, tiny):
    """A row taken whole (k = n) at the slider's integer β 4, 5, 10 or 20 (α 1.25, 1.2, 1.1,
    1.05): ``[x − τ]_+^β`` by :func:`_powers`' products in their order, written as computed
    (one pass over the row, not a pass of powers and a pass of writes); each β's loop compiled
    with it constant."""
    if b == 10:
        _whole_pass(xs, n, tau, out, r, tiny, 10)
    elif b == 5:
        _whole_pass(xs, n, tau, out, r, tiny, 5)
    elif b == 4:
        _whole_pass(xs, n, tau, out, r, tiny, 4)
    else:
        _whole_pass(xs, n, tau, out, r, tiny, 20)


@njit(nogil=True, cache=True)
def _write(xs, k, tau, beta, beta_int, rt, scr, vmath, out, r, idx, tiny):
    """Row r of ``out``: the candidates' ``[x − τ]_+^β`` (:func:`_powers`) at their columns,
    zeros elsewhere; values under ``tiny`` flushed to 0."""
    n = out.shape[1]
    if k == n and (beta_int == 10 or beta_int == 5 or beta_int == 4 or beta_int == 20):
        _write_whole(xs, n, tau, beta_int, out, r, tiny)  # the powers in the write's pass
        return
    _powers(xs, k, tau, beta, beta_int, rt, scr, vmath)
    if k == n:  # every score, in index order: idx is the identity, one contiguous write
        for j in range(n):
            p = xs[j]
            out[r, j] = p if p >= tiny else 0.0
    else:
        out[r, :] = 0.0
        for j in range(k):
            p = xs[j]
            out[r, idx[j]] = p if p >= tiny else 0.0


# -- torch's OpenMP team (sparse_core/entmax/_cpu_team.py): its C callbacks, here beside the
# kernel so that numba's cache (keyed on a function's own file) never pairs them with a stale one.


@intrinsic
def _fetch_add(typingctx, ptr, v):
    """``*ptr += v`` atomically; returns the old value."""

    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", args[0], args[1], "monotonic")

    return types.int64(ptr, v), codegen


@intrinsic
def _as_float(typingctx, bits):
    """The float64 whose bits are the int64 ``bits``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(bits), codegen


def _pointer_to(item, llvm_item):
    """An intrinsic: the int64 address as a pointer to ``item`` (made at import, module-level
    names: numba caches the functions that use them)."""

    @intrinsic
    def at(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], ir.PointerType(llvm_item))

        return types.CPointer(item)(address), codegen

    return at


_f32_at = _pointer_to(types.float32, ir.FloatType())
_f64_at = _pointer_to(types.float64, ir.DoubleType())
_i8_at = _pointer_to(types.int8, ir.IntType(8))
_i64_at = _pointer_to(types.int64, ir.IntType(64))


@njit(nogil=True, cache=True)
def _drain(block, z, out, status, vmath, copy):
    """Chunks of rows from the shared counter ``block[0]`` until none is left."""
    r_total = block[1]
    chunks = block[3]
    alpha = _as_float(block[7])
    tiny = _as_float(block[8])
    while True:
        c = _fetch_add(block, 1)
        if c >= chunks:
            return
        r0 = r_total * c // chunks
        solve_rows(z, out, alpha, tiny, r0, r_total * (c + 1) // chunks, status, vmath, copy)


# Two module-level callbacks (numba caches neither closures nor their intrinsics' variants),
# compiled by team_bodies on first use.
def _body_f32(block):
    shape = (block[1], block[2])
    status = carray(_i8_at(block[6]), (block[1],))
    vmath = carray(_i64_at(block[9]), (block[10],))
    z, out = carray(_f32_at(block[4]), shape), carray(_f32_at(block[5]), shape)
    copy = carray(_f32_at(block[11]), (block[12], block[2]))
    _drain(block, z, out, status, vmath, copy)


def _body_f64(block):
    shape = (block[1], block[2])
    status = carray(_i8_at(block[6]), (block[1],))
    vmath = carray(_i64_at(block[9]), (block[10],))
    z, out = carray(_f64_at(block[4]), shape), carray(_f64_at(block[5]), shape)
    copy = carray(_f64_at(block[11]), (block[12], block[2]))
    _drain(block, z, out, status, vmath, copy)


@functools.cache
def team_bodies() -> dict[np.dtype, object]:
    """The OpenMP team's callbacks by dtype (``_cpu_team.Team``), compiled (or loaded from
    numba's cache) on the first call rather than at import: a process that only needs the row
    kernels, such as a test compiling ``_compact`` for another CPU, does not build them."""
    compile_ = cfunc(types.void(types.CPointer(types.int64)), nopython=True, nogil=True, cache=True)
    return {np.dtype(np.float32): compile_(_body_f32), np.dtype(np.float64): compile_(_body_f64)}
