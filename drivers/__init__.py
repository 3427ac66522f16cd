"""Robot-arm drivers behind edge's ``RobotDriver`` contract (see edge/contracts.py).

* :class:`drivers.sim_arm.SimArmDriver` — the MuJoCo or PyBullet arm of a ``sim`` tabletop env.
* :mod:`drivers.bridge_arm` — an arm behind MCU motor controllers speaking ``firmware_bridge``.
* :mod:`drivers.opencv_camera` — a real camera as an observation source.

May import: edge (contracts), sim, firmware_bridge. Never imported by edge core.
"""
