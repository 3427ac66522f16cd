import math

import pytest
from scipy import stats as sps

from edge.stats import mcnemar_exact, paired, percentiles, wilson


def test_wilson_matches_the_closed_form_and_edges():
    lo, hi = wilson(85, 100)
    assert lo == pytest.approx(0.7672, abs=1e-4) and hi == pytest.approx(0.9069, abs=1e-4)
    assert wilson(0, 0) == (0.0, 1.0)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson(11, 10)


@pytest.mark.parametrize("a,b", [(47, 28), (12, 8), (0, 5), (3, 3), (0, 0)])
def test_mcnemar_exact_equals_scipy_binomtest(a, b):
    want = 1.0 if a + b == 0 else sps.binomtest(a, a + b, 0.5).pvalue
    assert mcnemar_exact(a, b) == pytest.approx(want, rel=1e-9)


def test_paired_counts_discordant_seeds():
    p = paired("1101", "1011")
    assert (p["only_a"], p["only_b"], p["successes_a"], p["successes_b"]) == (1, 1, 3, 3)
    with pytest.raises(ValueError):
        paired("11", "1")


def test_percentiles_match_numpy_default():
    import numpy as np

    x = np.random.default_rng(0).normal(size=37)
    assert percentiles(x, (50.0, 95.0)) == pytest.approx(tuple(np.percentile(x, (50, 95))))
    assert all(math.isnan(v) for v in percentiles([], (50.0,)))
