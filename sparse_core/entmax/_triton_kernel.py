"""The Triton kernel of :mod:`sparse_core.entmax_triton` (algorithm and guarantee there).

A module of its own, imported on first use: importing it imports triton, an optional dependency.
"""

import triton
import triton.language as tl


@triton.jit
def _ipow(y, K: tl.constexpr):
    """y ** K for a constexpr integer K >= 0 (0 ** 0 = 1: callers mask)."""
    r = tl.full(y.shape, 1.0, y.dtype)
    for _ in tl.static_range(K):
        r = r * y
    return r


@triton.jit
def _pow32(y, e, K: tl.constexpr):
    """y ** e for y >= 0, 0 where y == 0; K > 0 an integer exponent, else e used."""
    pos = y > 0
    if K > 0:
        r = _ipow(y, K)
    else:
        r = tl.exp2(tl.log2(tl.where(pos, y, 1.0)) * e)
    return tl.where(pos, r, 0.0)


@triton.jit
def _pow64(y, e, K: tl.constexpr):
    pos = y > 0
    if K > 0:
        r = _ipow(y, K)
    else:
        r = tl.exp(tl.log(tl.where(pos, y, 1.0)) * e)
    return tl.where(pos, r, 0.0)


@triton.jit
def _add2(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@triton.jit
def _add3(a0, a1, a2, b0, b1, b2):
    return a0 + b0, a1 + b1, a2 + b2


@triton.jit
def entmax_kernel(
    Z,
    OUT,
    PARAMS,
    STATUS,
    n,
    stride_z,
    stride_o,
    BLOCK: tl.constexpr,
    BETA_INT: tl.constexpr,
    CLOSED: tl.constexpr,
    HALLEY: tl.constexpr,
    MAX_WARM: tl.constexpr,
    MAX_EXACT: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    valid = cols < n
    z = tl.load(Z + row * stride_z + cols, mask=valid, other=float("-inf"))
    c = tl.load(PARAMS + 0)  # α − 1, float64
    beta = tl.load(PARAMS + 1)
    thr = tl.load(PARAMS + 2).to(tl.float32)
    c32 = c.to(tl.float32)
    nbad = tl.sum(((z != z) | (z == float("inf"))).to(tl.int32), 0)
    m = tl.max(z, 0)
    live = (nbad == 0) & (m > float("-inf"))
    status = tl.where(nbad > 0, 2, 0)
    i = 0
    j = 0
    o_ptr = OUT + row * stride_o + cols
    if live:
        m64 = m.to(tl.float64)
        x = (z - m) * c32  # (BLOCK,) <= 0, masked entries -inf
        # 1-2. warm start: float32 Halley (Newton for β < 2) on H_β from τ = −1
        tau = c * 0.0 - 1.0
        step = c * 0.0 + 1.0
        prev = c * 0.0 + 4.0
        # until a step is below 1e-6, or (float32 noise near τ*) stops halving after three
        while (i < MAX_WARM) & (tl.abs(step) > 1e-6) & ((i < 3) | (tl.abs(step) < 0.5 * prev)):
            prev = tl.abs(step)
            t32 = tau.to(tl.float32)
            y = x - t32
            y = tl.where(y > thr, y, 0.0)
            if HALLEY:  # (G₂, G₁, G) = Σ (y^(β−2), y^(β−1), y^β) in one reduction
                if BETA_INT == 2:
                    u = tl.where(y > 0, 1.0, 0.0)
                else:
                    u = _pow32(y, (beta - 2.0).to(tl.float32), BETA_INT - 2)
                uy = u * y
                s2, s1, s0 = tl.reduce((u, uy, uy * y), 0, _add3)
                g2 = s2.to(tl.float64)
            else:
                if BETA_INT == 1:
                    u = tl.where(y > 0, 1.0, 0.0)
                else:
                    u = _pow32(y, (beta - 1.0).to(tl.float32), BETA_INT - 1)
                s1, s0 = tl.reduce((u, u * y), 0, _add2)
                g2 = c * 0.0
            g1 = s1.to(tl.float64)
            g = s0.to(tl.float64)
            nq = tl.exp(tl.log(g) * c)  # G^(1/β)
            r1 = g1 / g
            s = (nq - 1.0) / (nq * r1)
            if HALLEY:
                q = (g2 / g - r1 * r1) * ((beta - 1.0) / 2.0) / r1
                hal = s / (1.0 - s * q)
                hal = tl.where(hal == hal, hal, float("-inf"))
                up = tl.maximum(g - 1.0, 0.0) * c
                st = tl.maximum(tl.minimum(hal, up), s)
            else:
                st = s
            step = tl.where(st == st, st, 0.0)
            tau = tl.maximum(t32.to(tl.float64) + step, -1.0)
            i += 1
        # 3. exact phase, float64 on the whole row: x = c (z − m) exactly (float32 z, m)
        x64 = (z.to(tl.float64) - m64) * c
        if CLOSED > 0:
            changed = 1
            while (j < MAX_EXACT) & (changed > 0):
                s_in = x64 > tau
                xs = tl.where(s_in, x64, 0.0)
                if CLOSED == 1:
                    kk, s1, s2 = tl.reduce((s_in.to(tl.float64), xs, xs * xs), 0, _add3)
                else:
                    kk, s1 = tl.reduce((s_in.to(tl.float64), xs), 0, _add2)
                kd = tl.maximum(kk, 1.0)
                if CLOSED == 1:
                    mean = s1 / kd
                    var = s2 / kd - mean * mean
                    new = mean - tl.sqrt(tl.maximum(1.0 / kd - var, 0.0))
                else:
                    new = (s1 - 1.0) / kd
                new = tl.where(kk > 0, new, tau)
                changed = tl.sum(((x64 > new) != s_in).to(tl.int32), 0)
                tau = new
                j += 1
            if changed > 0:
                status = 1
        else:
            extra = 0
            while (j < MAX_EXACT) & (extra < 2):
                y64 = tl.maximum(x64 - tau, 0.0)
                d1 = _pow64(y64, beta - 1.0, BETA_INT - 1)
                g1, g = tl.reduce((d1, d1 * y64), 0, _add2)
                gp = tl.exp(tl.log(g) * (1.0 - c))  # g^(1 − 1/β)
                big = (g - gp) / g1
                big = tl.where(g1 > 0, big, 0.0)
                tau = tau + big
                if tl.abs(big) <= 1e-6:
                    extra += 1
                j += 1
            if extra < 2:
                status = 1
        # 4. output
        y64 = tl.maximum(x64 - tau, 0.0)
        p = _pow64(y64, beta, BETA_INT)
        p = tl.where(p < 1.1754943508222875e-38, 0.0, p)
        tl.store(o_ptr, p.to(tl.float32), mask=valid)
    else:
        tl.store(o_ptr, tl.zeros((BLOCK,), tl.float32), mask=valid)
    tl.store(STATUS + row * 3, status)
    tl.store(STATUS + row * 3 + 1, i)
    tl.store(STATUS + row * 3 + 2, j)
