"""bench's value check stays exact at any rank count: with bfloat16 on 100+ ranks the old values (0-4 per rank) summed
past 256, where bfloat16 rounds, so the expected sum was inexact and NCCL's reduction order (not the rank's loop order)
decided whether good results counted as #wrong."""

import pytest

torch = pytest.importorskip("torch")

from envmatrix.bench.sizes import DTYPE_BYTES  # noqa: E402
from envmatrix.rank.collective_timer import BenchContext  # noqa: E402


@pytest.mark.parametrize("dtype", sorted(DTYPE_BYTES))
@pytest.mark.parametrize("world", [2, 64, 65, 100, 200, 257, 1000, 5000])
def test_sums_exact_in_any_order(dtype, world):
    c = BenchContext(None, torch, torch.device("cpu"), 0, world, 8, dtype)
    terms = [c.pattern(48, r) for r in range(world)]
    exact = sum(t.to(torch.float64) for t in terms)
    forward = sum(terms)
    backward = sum(reversed(terms))
    pairwise = terms
    while len(pairwise) > 1:  # a tree order, as NCCL's tree algorithm adds
        pairwise = [pairwise[i] + pairwise[i + 1] if i + 1 < len(pairwise) else pairwise[i]
                    for i in range(0, len(pairwise), 2)]
    for got in (forward, backward, pairwise[0]):
        assert torch.equal(got.to(torch.float64), exact), (dtype, world)
    assert all(t.sum().item() > 0 for t in terms[:8])  # every rank still contributes: a lost chunk is #wrong
    assert not torch.equal(terms[0], terms[1])  # ranks' values differ: a swapped chunk is #wrong


def test_small_worlds_keep_the_values_of_earlier_records():
    c = BenchContext(None, torch, torch.device("cpu"), 1, 8, 8, "float32")
    assert c.pattern(6, 1).tolist() == [1, 2, 3, 1, 2, 3]
