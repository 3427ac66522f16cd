"""Hand-written policies for the object tasks that read the simulator's true poses.

They bound the tasks (``benchmarks/object_task_scripted.py``: how often a competent policy succeeds
within the step limit) and, in training, can play some episodes to test whether the data an agent
collects is what limits its model (``RunConfig.explore_scripted``; a diagnostic that reads
privileged state, not a learning method).

* ``reach3``: move towards the red cube.
* ``push3``: if the TCP is not behind the red cube (on the side away from the goal square), go
  around it at ``clear`` metres; once behind, line up with the cube–goal line to within
  ``side_tol`` at ``back`` metres behind the cube; then push towards the goal.
"""

from __future__ import annotations

import numpy as np

DIRS = np.array([[np.cos(a * np.pi / 4), np.sin(a * np.pi / 4)] for a in range(8)])  # discrete8 directions
BACK_M, SIDE_TOL_M, CLEAR_M = 0.06, 0.02, 0.065  # push3 defaults (chosen on 24 episodes from seed 600,000,000)


def compass(v: np.ndarray) -> int:
    """The discrete8 action whose direction is closest to ``v``."""
    return int(np.argmax(DIRS @ v))


def push_action(tcp: np.ndarray, red: np.ndarray, goal: np.ndarray, back: float = BACK_M,
                side_tol: float = SIDE_TOL_M, clear: float = CLEAR_M) -> int:
    """push3's scripted action from the TCP, red cube and goal positions (xy metres)."""
    u = goal - red
    u = u / (np.linalg.norm(u) + 1e-9)
    perp = np.array([-u[1], u[0]])
    along, side = float((tcp - red) @ u), float((tcp - red) @ perp)
    if along > -0.025:  # not behind the cube: go around it
        s = 1.0 if side >= 0 else -1.0
        want = s * perp if abs(side) < clear else (red - clear * u + s * clear * perp) - tcp
    elif abs(side) > side_tol:  # behind, off the line: line up
        want = (red - back * u) - tcp
    else:
        want = u
    return compass(want)


def scripted_action(env) -> int:
    """The scripted action for an :class:`world_models.object_env.ObjectTaskEnv`'s current state."""
    tcp, red = env._tcp()[:2], env.env.backend.object_pose7("red")[:2]
    if env.cfg.task == "push3":
        return push_action(tcp, red, env._goal())
    return compass(red - tcp)


class ObjectPlay:
    """Task-agnostic object play: push a cube drawn uniformly from all of the scene's cubes towards
    a point 5–20 cm from it in a uniform direction, a new draw after a geometric number of steps
    (mean ``segment``); each step is a uniform random action with probability ``eps``. It reads the
    cubes' and the TCP's positions (what the oracle slots hold) but neither the goal nor which cube
    is the target: data in which objects get pushed about, not a task policy.

    ``rng`` is shared with the caller (draws: per new segment a cube, an angle, a distance and a
    length; per step the ε test and, when it fires, the random action)."""

    def __init__(self, rng: np.random.Generator, eps: float, segment: float = 20.0) -> None:
        if not 0.0 <= eps <= 1.0:
            raise ValueError(f"eps={eps!r}: need 0 <= eps <= 1")
        if not (np.isfinite(segment) and segment >= 1.0):
            raise ValueError(f"segment={segment!r}: must be a finite number >= 1 step")
        self.rng, self.eps, self.segment = rng, float(eps), float(segment)
        self._left, self._obj, self._aim = 0, "", np.zeros(2)

    def action(self, env) -> int:
        """The next action for an :class:`world_models.object_env.ObjectTaskEnv`'s current state."""
        pose = env.env.backend.object_pose7
        if self._left <= 0:
            names = [o.name for o in env.env.scene.objects]
            self._obj, ang = names[int(self.rng.integers(len(names)))], float(self.rng.uniform(0.0, 2.0 * np.pi))
            self._aim = pose(self._obj)[:2] + self.rng.uniform(0.05, 0.2) * np.array([np.cos(ang), np.sin(ang)])
            self._left = int(self.rng.geometric(1.0 / self.segment))
        self._left -= 1
        if self.rng.random() < self.eps:
            return int(self.rng.integers(8))
        return push_action(env._tcp()[:2], pose(self._obj)[:2], self._aim)
