from itertools import combinations

import pytest

from es_grpo import maj_at_k, pass_at_k


@pytest.mark.parametrize("n", [1, 2, 5, 8, 10])
def test_pass_at_k_matches_enumeration_of_subsets(n):
    for c in range(n + 1):
        samples = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            subsets = list(combinations(samples, k))
            brute = sum(any(s) for s in subsets) / len(subsets)
            assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_at_k_large_n_is_stable_and_monotone():
    values = [pass_at_k(1024, 3, k) for k in (1, 2, 4, 16, 64, 256, 1024)]
    assert values[0] == pytest.approx(3 / 1024)
    assert all(a <= b for a, b in zip(values, values[1:])) and values[-1] == 1.0


@pytest.mark.parametrize("n, c, k", [(4, 5, 1), (4, 1, 5), (4, 1, 0), (4, -1, 1)])
def test_pass_at_k_rejects_impossible_arguments(n, c, k):
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def test_maj_at_k_votes_per_disjoint_group():
    keys = ["a", "b", "b", "c", "x", "x", "y", "y"]
    correct = [True, False, False, True, True, True, False, False]
    # group 1: b wins (wrong); group 2: x and y tie, x seen first (right)
    assert maj_at_k(keys, correct, 4) == 0.5
    assert maj_at_k(keys, correct, 1) == 0.5
