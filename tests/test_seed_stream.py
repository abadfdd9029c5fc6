"""The compiled SeedSequence and PCG64 stream give numpy's numbers, word for word."""

from __future__ import annotations

import numpy as np
import pytest

from envs import seed_stream as ss


def _entropies(count: int) -> list[int]:
    rng = np.random.default_rng(0)
    small = list(range(5))
    drawn = [int(x) for x in rng.integers(0, 2**63, size=count)]
    huge = [x * 2**40 + 5 for x in drawn[:20]]  # three and more 32-bit words
    return small + drawn + huge


@pytest.mark.parametrize("keys", [0, 1, 2])
def test_generate_state_equals_numpys_seed_sequence(keys: int) -> None:
    rng = np.random.default_rng(keys)
    for entropy in _entropies(300):
        spawn_key = tuple(int(k) for k in rng.integers(0, 2**32, size=keys))
        n = int(rng.integers(1, 20))
        want = np.random.SeedSequence(entropy=entropy, spawn_key=spawn_key).generate_state(n, dtype=np.uint32)
        assert np.array_equal(ss.generate_state(ss.entropy_words(entropy, spawn_key), n), want.astype(np.uint64))


def test_pcg64_state_and_draws_equal_numpys_generator() -> None:
    rng = np.random.default_rng(1)
    for entropy in _entropies(300):
        numpy_bits = np.random.PCG64(entropy)
        state = ss.pcg64(ss.generate_state(ss.entropy_words(entropy), 8))
        want = numpy_bits.state["state"]
        assert (int(state[0]) << 64 | int(state[1]), int(state[2]) << 64 | int(state[3])) == (
            want["state"],
            want["inc"],
        )
        gen = np.random.Generator(numpy_bits)
        k = int(rng.integers(0, 40))
        # the order a course draws in: doubles, coin flips (integers(2)), doubles; and
        # integers(1), which draws nothing, before the last doubles
        want_draws = [gen.random(37), gen.integers(2, size=k), gen.random(k), gen.integers(1, size=k), gen.random(3)]
        got = [ss.random_doubles(state, 37), ss.coin_flips(state, k), ss.random_doubles(state, k)]
        got += [np.zeros(k, dtype=np.int64), ss.random_doubles(state, 3)]
        for a, b in zip(got, want_draws):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_a_negative_seed_is_refused_as_numpy_refuses_it() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        ss.entropy_words(-1)


def test_episode_seeds_are_the_seed_sequences_words() -> None:
    from poet.seeding import _name_key, episode_seeds

    for seed in _entropies(100):
        ss_numpy = np.random.SeedSequence(entropy=seed, spawn_key=(_name_key("episode"),))
        want = [int(x >> 1) for x in ss_numpy.generate_state(7, dtype=np.uint32)]
        assert episode_seeds(seed, 7) == want
