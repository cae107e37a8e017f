"""A tiny deterministic 32-bit integer hash PRNG, identical in Python and in the browser.

BigBird's random keys, Longformer's random globals (and any other "random" pattern) draw from this
hash instead of a stateful generator, so that ``frontend/js`` recomputes bit for bit the masks that
Python computes (docs/architecture.md, "Deterministic randomness shared with the browser").

Algorithm (all arithmetic on unsigned 32-bit words, i.e. mod 2**32)::

    mix32(x):                       # "lowbias32" finaliser (C. Wellons, hash-prospector)
        x ^= x >> 16
        x  = x * 0x7FEB352D mod 2**32
        x ^= x >> 15
        x  = x * 0x846CA68B mod 2**32
        x ^= x >> 16
        return x

    hash_u32(v_1, ..., v_k):        # any Python ints; negative ones are taken mod 2**32
        h = 0x9E3779B9
        for v in (v_1, ..., v_k):
            h = mix32(h XOR (v mod 2**32))
        return h

    hash_uniform(v_1, ..., v_k) = hash_u32(v_1, ..., v_k) / 2**32      # a double in [0, 1)

Test vectors (asserted in tests/core/test_patterns.py; the JS port must reproduce them)::

    hash_u32(0)          == 0x01FCE552   (33350994)
    hash_u32(1, 2, 3)    == 0xA6FDE042   (2801655874)
    hash_u32(7, 0, 5, 2) == 0xFD7B6CA4   (4252724388)
    hash_uniform(1, 2, 3) == 2801655874 / 4294967296   (0.65231134044...)

JavaScript port (only ``Math.imul``, xor and unsigned shifts; ``h ^ v`` applies ToInt32 to v, which
is v mod 2**32 for every integer-valued number, so the bit patterns agree)::

    function mix32(x) {
      x ^= x >>> 16; x = Math.imul(x, 0x7feb352d);
      x ^= x >>> 15; x = Math.imul(x, 0x846ca68b);
      x ^= x >>> 16; return x >>> 0;
    }
    export function hashU32(...ints) {
      let h = 0x9e3779b9;
      for (const v of ints) h = mix32(h ^ v);
      return h >>> 0;
    }
    export const hashUniform = (...ints) => hashU32(...ints) / 4294967296;

Both divisions by 2**32 are exact in IEEE doubles, and ``Math.floor(u * m)`` rounds the same way as
Python's ``math.floor(u * m)``, so index draws ``floor(hash_uniform(...) * m)`` agree too.

Streams: patterns hash ``(seed, STREAM, ...)`` with a per-pattern stream constant so that two
patterns given the same per-head seed do not draw correlated numbers.
"""

from __future__ import annotations

import operator

import torch
from torch import Tensor

MASK32 = 0xFFFFFFFF
GOLDEN32 = 0x9E3779B9
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
TWO32 = 4294967296.0

# Stream constants (the second hashed integer) of the patterns that draw random numbers.
BIGBIRD_STREAM = 1
LONGFORMER_STREAM = 2


def mix32(x: int) -> int:
    """The lowbias32 finaliser: a bijection of 32-bit words with good avalanche."""
    x &= MASK32
    x ^= x >> 16
    x = (x * _M1) & MASK32
    x ^= x >> 15
    x = (x * _M2) & MASK32
    x ^= x >> 16
    return x


def hash_u32(*ints: int) -> int:
    """Hash any number of integers to one unsigned 32-bit integer (see the module docstring)."""
    h = GOLDEN32
    for v in ints:
        h = mix32(h ^ (operator.index(v) & MASK32))
    return h


def hash_uniform(*ints: int) -> float:
    """``hash_u32(*ints) / 2**32``: a deterministic float in [0, 1)."""
    return hash_u32(*ints) / TWO32


# Vectorised twins (torch int64 tensors holding 32-bit words). A 32 x 32-bit product overflows
# int64, so multiplication is split into 16-bit halves: every partial product stays below 2**49.


def _mul32_t(x: Tensor, c: int) -> Tensor:
    lo, hi = c & 0xFFFF, c >> 16
    return (x * lo + (((x * hi) & 0xFFFF) << 16)) & MASK32


def _mix32_t(x: Tensor) -> Tensor:
    x = x ^ (x >> 16)
    x = _mul32_t(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32_t(x, _M2)
    return x ^ (x >> 16)


def hash_u32_t(*ints: int | Tensor) -> Tensor:
    """:func:`hash_u32` elementwise over broadcast integer tensors (and Python ints).

    Returns an int64 tensor of the broadcast shape holding values in [0, 2**32).
    """
    h = torch.tensor(GOLDEN32, dtype=torch.int64)
    for v in ints:
        t = torch.as_tensor(v)
        if t.is_floating_point() or t.dtype == torch.bool:
            raise ValueError(f"hash_u32_t takes integer tensors, got dtype {t.dtype}")
        h = _mix32_t(h ^ (t.to(torch.int64) & MASK32))
    return h


def hash_uniform_t(*ints: int | Tensor) -> Tensor:
    """:func:`hash_uniform` elementwise: a float64 tensor in [0, 1) of the broadcast shape."""
    return hash_u32_t(*ints).to(torch.float64) / TWO32
