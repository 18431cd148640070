import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import es_grpo  # noqa: E402


@pytest.fixture(scope="session")
def tiny():
    """The shipped tiny model and its tokenizer."""
    torch.set_num_threads(2)
    model, tokenizer = es_grpo.load_model("")
    return model.eval(), tokenizer


@pytest.fixture
def fresh_tiny():
    """A copy that a test may modify."""
    model, tokenizer = es_grpo.load_model("")
    return model.eval(), tokenizer


def pytest_addoption(parser):
    parser.addoption("--fuzz-count", type=int, default=100_000,
                     help="completions per verifier in the fuzz test")
