"""The statistics every result in the project is reported with — one implementation, used everywhere.

* :func:`wilson` — 95 % Wilson score interval of a success rate (k of n).
* :func:`mcnemar_exact` — exact two-sided McNemar test of two arms run on the same seeds.
* :func:`paired` — both of the above plus the win/loss counts from two per-seed outcome strings.
* :func:`percentiles` — linearly interpolated percentiles (numpy's default method) in pure Python,
  cheap enough for the control loop's tick.

Pure Python (``math`` only): importable on the robot without numpy or scipy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """95 % Wilson score interval for ``k`` successes out of ``n`` (``(0, 1)`` when n = 0)."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= k <= n:
        raise ValueError(f"wilson: need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact two-sided McNemar p-value from the discordant pairs: ``only_a`` seeds won by arm A
    alone, ``only_b`` by arm B alone (binomial test of only_a against n/2). 1.0 when n = 0."""
    n = only_a + only_b
    if n == 0:
        return 1.0
    k = min(only_a, only_b)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired(a: Sequence[Any] | str, b: Sequence[Any] | str) -> dict[str, Any]:
    """Two arms' per-seed outcomes on the same seeds (strings of "0"/"1" or sequences of bools) ->
    successes, Wilson intervals, discordant counts and the exact McNemar p."""
    xa = [bool(int(x)) if isinstance(x, str) else bool(x) for x in a]
    xb = [bool(int(x)) if isinstance(x, str) else bool(x) for x in b]
    if len(xa) != len(xb):
        raise ValueError(f"paired: arms have {len(xa)} and {len(xb)} episodes; they must share seeds")
    only_a = sum(p and not q for p, q in zip(xa, xb))
    only_b = sum(q and not p for p, q in zip(xa, xb))
    n = len(xa)
    return {"episodes": n, "successes_a": sum(xa), "successes_b": sum(xb),
            "ci95_a": list(wilson(sum(xa), n)), "ci95_b": list(wilson(sum(xb), n)),
            "only_a": only_a, "only_b": only_b, "mcnemar_p": mcnemar_exact(only_a, only_b)}


def percentiles(values: Iterable[float], qs: tuple[float, ...]) -> tuple[float, ...]:
    """Linearly interpolated percentiles (numpy's default method) of a small collection."""
    xs = sorted(values)
    if not xs:
        return tuple(float("nan") for _ in qs)
    top = len(xs) - 1
    out = []
    for q in qs:
        pos = q / 100.0 * top
        lo = int(pos)
        hi = min(lo + 1, top)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))
    return tuple(out)
