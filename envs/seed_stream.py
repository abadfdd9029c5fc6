"""numpy's SeedSequence and PCG64 stream, compiled: the same numbers without numpy's per-call cost.

An episode's seeds (`poet.seeding.episode_seeds`) and a terrain course's draws
(`envs.terrain_course`) each start a SeedSequence, and a course a PCG64 generator; in numpy
that costs more than laying the course out. The functions here compute what numpy computes
(`np.random.SeedSequence(entropy, spawn_key).generate_state(n)`; `np.random.PCG64(seed)`
and its `random()` doubles and small `integers()`), word for word, in compiled code:
tests/test_seed_stream.py checks them against numpy over many seeds.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np

_M32 = np.uint64(0xFFFFFFFF)
_POOL_SIZE = 4
_INIT_A, _MULT_A = np.uint64(0x43B0D7E5), np.uint64(0x931E8875)
_INIT_B, _MULT_B = np.uint64(0x8B51F9DD), np.uint64(0x58F38DED)
_MIX_MULT_L, _MIX_MULT_R = np.uint64(0xCA01F9DD), np.uint64(0x4973F715)
_XSHIFT = np.uint64(16)
# PCG64's 128-bit LCG multiplier, as (high, low) 64-bit words
_PCG_MULT_HI, _PCG_MULT_LO = np.uint64(2549297995355413924), np.uint64(4865540595714422341)
_DOUBLE_UNIT = 1.0 / 9007199254740992.0  # 2 ** -53


def entropy_words(entropy: int, spawn_key: Sequence[int] = ()) -> np.ndarray:
    """SeedSequence's assembled entropy as uint32 words: each int least significant word
    first, the entropy padded to the pool size with zeros when a spawn key follows."""
    run = _words(int(entropy))
    spawn = [w for k in spawn_key for w in _words(int(k))]
    if spawn and len(run) < _POOL_SIZE:
        run += [0] * (_POOL_SIZE - len(run))
    return np.array(run + spawn, dtype=np.uint64)


def _words(value: int) -> list[int]:
    if value < 0:
        raise ValueError(f"expected a non-negative integer, got {value}")
    out = [value & 0xFFFFFFFF]
    value >>= 32
    while value:
        out.append(value & 0xFFFFFFFF)
        value >>= 32
    return out


@numba.njit(cache=True, inline="always")
def _hashmix(value: np.uint64, hash_const: np.ndarray) -> np.uint64:
    value = (value ^ hash_const[0]) & _M32
    hash_const[0] = (hash_const[0] * _MULT_A) & _M32
    value = (value * hash_const[0]) & _M32
    return value ^ (value >> _XSHIFT)


@numba.njit(cache=True, inline="always")
def _mix(x: np.uint64, y: np.uint64) -> np.uint64:
    result = (_MIX_MULT_L * x - _MIX_MULT_R * y) & _M32
    return result ^ (result >> _XSHIFT)


@numba.njit(cache=True)
def _pool(entropy: np.ndarray) -> np.ndarray:
    """SeedSequence's mixed pool of 4 words from its assembled entropy."""
    mixer = np.zeros(_POOL_SIZE, dtype=np.uint64)
    hash_const = np.array([_INIT_A], dtype=np.uint64)
    for i in range(_POOL_SIZE):
        mixer[i] = _hashmix(entropy[i] if i < entropy.size else np.uint64(0), hash_const)
    for i_src in range(_POOL_SIZE):
        for i_dst in range(_POOL_SIZE):
            if i_src != i_dst:
                mixer[i_dst] = _mix(mixer[i_dst], _hashmix(mixer[i_src], hash_const))
    for i_src in range(_POOL_SIZE, entropy.size):
        for i_dst in range(_POOL_SIZE):
            mixer[i_dst] = _mix(mixer[i_dst], _hashmix(entropy[i_src], hash_const))
    return mixer


@numba.njit(cache=True)
def generate_state(entropy: np.ndarray, n_words: int) -> np.ndarray:
    """`SeedSequence.generate_state(n_words)` (uint32 words, held in uint64) from `entropy_words`."""
    pool = _pool(entropy)
    out = np.empty(n_words, dtype=np.uint64)
    hash_const = _INIT_B
    for i in range(n_words):
        value = (pool[i % _POOL_SIZE] ^ hash_const) & _M32
        hash_const = (hash_const * _MULT_B) & _M32
        value = (value * hash_const) & _M32
        out[i] = value ^ (value >> _XSHIFT)
    return out


# ------------------------------------------------------------------ PCG64
@numba.njit(cache=True, inline="always")
def _mul_64(a: np.uint64, b: np.uint64) -> tuple[np.uint64, np.uint64]:
    """The 128-bit product of two 64-bit words, as (high, low)."""
    a_lo, a_hi, b_lo, b_hi = a & _M32, a >> np.uint64(32), b & _M32, b >> np.uint64(32)
    p0, p1, p2, p3 = a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi
    mid = (p0 >> np.uint64(32)) + (p1 & _M32) + (p2 & _M32)
    low = (p0 & _M32) | (mid << np.uint64(32))
    high = p3 + (p1 >> np.uint64(32)) + (p2 >> np.uint64(32)) + (mid >> np.uint64(32))
    return high, low


@numba.njit(cache=True, inline="always")
def _step(state: np.ndarray) -> None:
    """state = state * MULT + inc (mod 2 ** 128); state = [high, low, inc high, inc low]."""
    high, low = _mul_64(state[1], _PCG_MULT_LO)
    high += state[0] * _PCG_MULT_LO + state[1] * _PCG_MULT_HI
    new_low = low + state[3]
    state[0] = high + state[2] + (np.uint64(1) if new_low < low else np.uint64(0))
    state[1] = new_low


@numba.njit(cache=True, inline="always")
def next_uint64(state: np.ndarray) -> np.uint64:
    """PCG64's next output (XSL-RR of the stepped state)."""
    _step(state)
    x = state[0] ^ state[1]
    rot = state[0] >> np.uint64(58)
    return (x >> rot) | (x << ((np.uint64(64) - rot) & np.uint64(63)))


@numba.njit(cache=True)
def pcg64(seed_words: np.ndarray) -> np.ndarray:
    """The state of `np.random.PCG64(seed)` from `generate_state(entropy_words(seed), 8)`:
    [high, low, inc high, inc low]."""
    w = np.empty(4, dtype=np.uint64)
    for k in range(4):  # generate_state(4, uint64): pairs of uint32 words, little-endian
        w[k] = seed_words[2 * k] | (seed_words[2 * k + 1] << np.uint64(32))
    state = np.zeros(4, dtype=np.uint64)
    state[2] = (w[2] << np.uint64(1)) | (w[3] >> np.uint64(63))  # inc = (initseq << 1) | 1
    state[3] = (w[3] << np.uint64(1)) | np.uint64(1)
    _step(state)
    low = state[1] + w[1]
    state[0] = state[0] + w[0] + (np.uint64(1) if low < state[1] else np.uint64(0))
    state[1] = low
    _step(state)
    return state


@numba.njit(cache=True)
def random_doubles(state: np.ndarray, n: int) -> np.ndarray:
    """`Generator.random(n)`: doubles in [0, 1) with 53 random bits each."""
    out = np.empty(n)
    for i in range(n):
        out[i] = np.float64(next_uint64(state) >> np.uint64(11)) * _DOUBLE_UNIT
    return out


@numba.njit(cache=True)
def coin_flips(state: np.ndarray, n: int) -> np.ndarray:
    """`Generator.integers(2, size=n)`: Lemire's bounded draw on 32-bit halves of 64-bit
    outputs (low half first), which for the range {0, 1} is each half's top bit. A half left
    over is dropped: only doubles follow it here, and they draw whole outputs."""
    out = np.empty(n, dtype=np.int64)
    word = np.uint64(0)
    for i in range(n):
        if i % 2 == 0:
            word = next_uint64(state)
            half = word & _M32
        else:
            half = word >> np.uint64(32)
        out[i] = np.int64(half >> np.uint64(31))
    return out
