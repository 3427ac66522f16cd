"""The HIL campaign (``edge hil``): fault scenarios run through the full stack and judged on the
recorded trace. An app-layer package like :mod:`edge.runtime` (it wires the firmware bridge, the
emulated MCU, the simulator and the runtime loop together); the on-robot core never imports it.

* :mod:`edge.hil.harness` — rig and scenario configs, the catalogue, one scenario end to end;
* :mod:`edge.hil.host` — the host side (runtime loop + bridge driver), in-process or a subprocess;
* :mod:`edge.hil.policy` — the replayed expert and the injected policy faults;
* :mod:`edge.hil.checks`, :mod:`edge.hil.report` — the trace checks and the Markdown/JSON report.
"""
