"""Measuring inference savings: the target-device cost model, the FLOP counter, ``edge report``
(one run directory -> timelines, histograms, a summary) and ``edge profile`` (arms of schedulers
and backends on the same seeds -> success, NFE, latency and projected on-device cost).

Modules: :mod:`.device_model` (no torch), :mod:`.flops` (torch), :mod:`.planner_cost` (a world-model
planner's decision on a device; no torch), :mod:`.report`, :mod:`.profile`, :mod:`.plots`
(matplotlib, imported when drawing).
"""
