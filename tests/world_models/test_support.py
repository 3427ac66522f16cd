"""world_models/support.py: the categorical supports' transform and decoding, torch and numpy."""

import numpy as np
import torch

from world_models.support import Support


def test_numpy_decoding_agrees_with_torch_and_inverts_two_hot():
    sup = Support(lim=5.0, n=41)
    logits = np.random.default_rng(0).normal(0, 3, (4, 8, 41)).astype(np.float32)
    got = sup.decode_np(logits)
    exact = Support(lim=5.0, n=41)
    exact.atoms = exact.atoms.double()
    want64 = exact.decode(torch.as_tensor(logits, dtype=torch.float64)).numpy()
    assert got.dtype == np.float64 and got.shape == (4, 8)
    np.testing.assert_allclose(got, want64, rtol=1e-9, atol=1e-9)  # torch's decoding in float64
    want32 = sup.decode(torch.as_tensor(logits)).numpy()  # float32: the transform amplifies its rounding
    np.testing.assert_allclose(got, want32, rtol=1e-4, atol=1e-4)
    x = torch.tensor([-20.0, -1.5, 0.0, 0.3, 7.0])
    np.testing.assert_allclose(sup.decode_np(np.log(sup.two_hot(x).numpy() + 1e-12)), x.numpy(), atol=1e-3)
