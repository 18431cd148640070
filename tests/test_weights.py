"""analyses/weights.py: sparsify, drift, module kinds and what Gaussian geometry keeps, on
hand-built weights and updates."""
import numpy as np
import pytest
import torch

from analyses import weights


def test_sparsify_zeroes_exactly_the_small_updates():
    base = {"a": torch.zeros(10), "b": torch.ones(2, 5)}
    delta = {"a": torch.tensor([0.1, -0.1, 0.5, -0.5, 1e-3, -1e-3, 0.0, 2.0, -2.0, 0.2]),
             "b": torch.full((2, 5), 0.3)}
    trained = {k: base[k] + delta[k] for k in base}
    kept, sparsity = weights.sparsify(base, trained, tau=0.2)
    # |delta| <= 0.2: 0.1, -0.1, 1e-3, -1e-3, 0.0 and 0.2 (up to rounding of 0 + 0.2) -> 6 of 20
    # coordinates
    assert sparsity == pytest.approx(6 / 20)
    assert torch.equal(kept["a"], torch.tensor([0, 0, 0.5, -0.5, 0, 0, 0, 2.0, -2.0, 0]))
    assert torch.equal(kept["b"], trained["b"])
    assert weights.sparsify(base, trained, tau=-1)[1] == 0.0


def test_drift_per_module_kind_on_a_known_delta():
    base = {"model.embed_tokens.weight": torch.full((4,), 2.0),
            "model.layers.0.self_attn.q_proj.weight": torch.ones(4),
            "model.layers.0.mlp.up_proj.weight": torch.ones(4), "model.norm.weight": torch.ones(4)}
    trained = dict(base)
    # ||delta|| = 1, ||base|| = 2
    trained["model.layers.0.self_attn.q_proj.weight"] = torch.ones(4) * 1.5
    # ||delta|| = 4, ||base|| = 4
    trained["model.embed_tokens.weight"] = torch.tensor([2.0, 2.0, 2.0, 6.0])
    result = weights.drift(base, trained)
    assert result["attention"] == pytest.approx(0.5) and result["embeddings"] == pytest.approx(1.0)
    assert result["mlp"] == 0.0 and result["norms"] == 0.0
    assert result["total"] == pytest.approx((1 + 16) ** 0.5 / (16 + 4 + 4 + 4) ** 0.5)


def test_module_kinds_rank_as_the_paper_says_on_every_seed():
    es = [{"total": 1, "norms": 3.0, "attention": 2.0, "mlp": 1.0, "embeddings": 0.5}] * 2
    assert weights.module_kinds_seeds(es, "es") == (2, 2)
    assert weights.module_kinds_seeds([*es,
                                       {"total": 1, "norms": 3.0, "attention": 0.1, "mlp": 1.0}],
                                       "es") == (2, 3)
    # no lm_head kind: tied
    tied = [{"total": 1, "embeddings": 2.0, "norms": 1.0, "attention": 0.5}]
    assert (weights.module_kinds_seeds(tied, "grpo") == (1, 1)
            and weights.module_kinds_seeds(tied, "es") == (0, 1))


@pytest.mark.parametrize("zeroed", [0.5, 0.78, 0.95])
def test_gaussian_geometry_keeps_what_gaussian_kept_share_says_and_a_sparse_signal_beats_it(zeroed):
    """An update of Gaussian noise plus a small spread-out signal, its smallest `zeroed` coordinates
    by size zeroed: the signal's projection kept is gaussian_kept_share(zeroed) (0.68 at 78%; a
    random mask keeps 0.22). The control: a signal on few coordinates, larger than the noise there,
    keeps over half of the rest."""
    rng, size = np.random.default_rng(0), 400_000
    noise = rng.standard_normal(size)

    def kept_share(signal):
        update = noise + signal
        cut = np.quantile(np.abs(update), zeroed)
        return float(signal @ np.where(np.abs(update) > cut, update, 0.0)) / float(signal @ update)
    spread = 0.05 * rng.standard_normal(size)
    sparse = np.where(rng.random(size) < 0.01, 3.0 * rng.standard_normal(size), 0.0)
    print(f"zeroed {zeroed}: predicted {weights.gaussian_kept_share(zeroed):.3f}, spread signal "
          f"{kept_share(spread):.3f}, sparse {kept_share(sparse):.3f}")
    assert kept_share(spread) == pytest.approx(weights.gaussian_kept_share(zeroed), abs=0.03)
    assert kept_share(sparse) > (weights.gaussian_kept_share(zeroed)
                                 + (1 - weights.gaussian_kept_share(zeroed)) / 2)
    assert weights.gaussian_kept_share(0.78) == pytest.approx(0.68, abs=0.01)
