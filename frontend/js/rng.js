/**
 * The deterministic 32-bit integer hash PRNG shared with Python (sparse_core/rng.py).
 *
 * BigBird's random keys, Longformer's random globals and any other "random" pattern draw from this
 * hash instead of a stateful generator, so that the page recomputes bit for bit the masks that
 * Python computes (docs/architecture.md, "Deterministic randomness shared with the browser").
 *
 *     mix32(x):  x ^= x >> 16; x *= 0x7FEB352D; x ^= x >> 15; x *= 0x846CA68B; x ^= x >> 16
 *     hashU32(v1, ..., vk):  h = 0x9E3779B9; for each v: h = mix32(h XOR (v mod 2^32))
 *     hashUniform(...) = hashU32(...) / 2^32   in [0, 1)
 *
 * `h ^ v` applies ToInt32 to v, which is v mod 2^32 for every integer-valued number (negative
 * ones included), so the bit patterns agree with Python's `v & 0xFFFFFFFF`.
 *
 * Test vectors (sparse_core/rng.py): hashU32(0) = 0x01FCE552, hashU32(1, 2, 3) = 0xA6FDE042,
 * hashU32(7, 0, 5, 2) = 0xFD7B6CA4.
 */

/** Stream constants (the second hashed integer) of the patterns that draw random numbers. */
export const BIGBIRD_STREAM = 1;
export const LONGFORMER_STREAM = 2;

const TWO32 = 4294967296;

/** The lowbias32 finaliser (C. Wellons, hash-prospector): a bijection of 32-bit words. */
function mix32(x) {
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d);
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b);
  x ^= x >>> 16;
  return x >>> 0;
}

/**
 * Hash any number of integers to one unsigned 32-bit integer.
 * @param {...number} ints integer-valued numbers
 * @returns {number} in [0, 2^32)
 */
export function hashU32(...ints) {
  let h = 0x9e3779b9;
  for (const v of ints) h = mix32(h ^ v);
  return h >>> 0;
}

/**
 * `hashU32(...ints) / 2^32`: a deterministic double in [0, 1) (the division is exact).
 * @param {...number} ints
 * @returns {number}
 */
export function hashUniform(...ints) {
  return hashU32(...ints) / TWO32;
}
