"""Why push3 is not learned over oracle slots: what the agent did, and what its model predicts at contact.

Oracle slots are the object states through a fixed random linear map (``world_models.observer``),
so a run's replay can be decoded back to positions exactly. For each ``--runs`` directory (an
``edge train world-model --obs oracle --task push3`` run) this script reports:

* **behaviour over training**, per third of the replay (every episode the agent played while
  training, acting with search and exploration): the share of episodes in which the target cube
  moved at all, the share of steps in which it moved (> 2 mm), how much of the cube–goal distance
  an episode closed (negative: the cube was pushed away), and the success rate;
* **the final model's one-step predictions** on the last ``--tail`` episodes of the replay (data it
  was trained on, so an optimistic check), split into contact steps (the cube moved > 2 mm) and the
  rest: the cosine between predicted and real cube displacement, the ratio of their lengths, the
  predicted vs real reward, and for comparison the same for the robot's own displacement; the
  real cube and TCP steps, and how much of the cube's step goes towards (or away from) the goal;
* **counterfactuals at contact**: the model predicts the next state for all 8 actions in one pass;
  at contact steps, how far apart its predicted cube–goal distances are across the actions (how
  much the choice of action matters to it), against the same away from contact; and how well its
  predicted change of that distance for the acted action follows the real one.

    python benchmarks/wm_push_diagnosis.py --runs runs/wm_bench_push3_oracle/push3_oracle_s0 \\
        runs/wm_bench_push3_oracle/push3_oracle_s1 --out benchmarks/results/wm_push_diagnosis.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from edge import atomic
from edge.argtypes import writable_file
from edge.telemetry import machine_info
from edge.vla.manifest import git_revision

MOVED_M = 0.002  # a cube step longer than this counts as contact


def decode_positions(states: np.ndarray, seed: int, check: bool = True, features: int = 8) -> np.ndarray:
    """(T+1, N, D) oracle slots of ``features`` features -> (T+1, N, 3) positions in metres (the
    observer's map, inverted; a model's predicted states, ``check=False``, are decoded by least
    squares)."""
    from world_models.object_env import _CENTER_M, _SCALE_M
    from world_models.observer import oracle_map

    feats = states @ np.linalg.pinv(oracle_map(features, states.shape[-1], seed))  # (T+1, N, F)
    if check and not np.allclose(feats[..., 7], 1.0, atol=1e-3):
        raise ValueError("these states are not oracle slots of this seed's map (bias feature != 1)")
    return feats[..., :3] * _SCALE_M + _CENTER_M


def behaviour(episodes: list, seed: int, features: int = 8) -> list[dict]:
    """Per third of the replay: how often the cube moved, how much closer to the goal it ended."""
    rows = []
    for e in episodes:
        pos = decode_positions(e.states, seed, features=features)
        tgt, goal = pos[:, 2, :2], pos[:, 1, :2]
        step = np.linalg.norm(np.diff(tgt, axis=0), axis=1)
        d = np.linalg.norm(tgt - goal, axis=1)
        rows.append((bool((step > MOVED_M).any()), float((step > MOVED_M).mean()), float(d[0] - d[-1]),
                     bool(e.terminated), float(d[0])))
    out = []
    n = len(rows)
    for i, name in enumerate(("first third", "second third", "last third")):
        part = rows[i * n // 3:(i + 1) * n // 3]
        if not part:
            continue
        a = np.array(part, dtype=float)
        out.append({"part": name, "episodes": len(part), "cube_moved_episodes": round(a[:, 0].mean(), 3),
                    "cube_moved_steps": round(a[:, 1].mean(), 3), "closed_cm_mean": round(100 * a[:, 2].mean(), 2),
                    "closed_gt_3cm": round((a[:, 2] > 0.03).mean(), 3), "opened_gt_3cm": round((a[:, 2] < -0.03).mean(), 3),
                    "success": round(a[:, 3].mean(), 3), "start_distance_cm_median": round(100 * np.median(a[:, 4]), 1)})
    return out


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(-1) / np.maximum(np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1), 1e-12)


def model_checks(path: Path, episodes: list, seed: int, features: int = 8) -> dict:
    import torch

    from world_models.policy import load_world_model

    cfg, model, _ = load_world_model(path)
    c = cfg.planner.context
    rec = {k: [] for k in ("contact", "tgt_cos", "tgt_len_ratio", "rob_cos", "rew_pred", "rew_real",
                           "spread_cm", "closer_pred_cm", "closer_real_cm", "cube_step_cm", "tcp_step_cm")}
    with torch.no_grad():
        for e in episodes:
            z = torch.as_tensor(e.states).float()  # (T+1, N, D)
            pos = decode_positions(e.states, seed, features=features)
            for t in range(len(e.actions)):
                lo = max(0, t - c)
                n = t - lo + 1
                win = torch.zeros(1, c + 1, *z.shape[1:])
                act = torch.zeros(1, c + 1, dtype=torch.int64)
                val = torch.zeros(1, c + 1, dtype=torch.bool)
                win[0, -n:], val[0, -n:] = z[lo:t + 1], True
                act[0, -n:-1] = torch.as_tensor(e.actions[lo:t])
                out = model(win, act, val, heads="none", branch=True)
                nxt = out["branch_next_z"][0].numpy()  # (A, N, D)
                rew = model.support.decode(out["branch_reward_logits"][0]).numpy()  # (A,)
                pred = decode_positions(nxt, seed, check=False, features=features)  # (A, N, 3)
                a = int(e.actions[t])
                real_d_tgt = pos[t + 1, 2, :2] - pos[t, 2, :2]
                pred_d_tgt = pred[:, 2, :2] - pos[t, 2, :2]  # (A, 2)
                contact = np.linalg.norm(real_d_tgt) > MOVED_M
                rec["contact"].append(contact)
                rec["tgt_cos"].append(float(_cos(pred_d_tgt[a], real_d_tgt)) if contact else np.nan)
                rec["tgt_len_ratio"].append(float(np.linalg.norm(pred_d_tgt[a]) / np.linalg.norm(real_d_tgt))
                                            if contact else np.nan)
                rec["rob_cos"].append(float(_cos(pred[a, 0, :2] - pos[t, 0, :2], pos[t + 1, 0, :2] - pos[t, 0, :2])))
                rec["rew_pred"].append(float(rew[a]))
                rec["rew_real"].append(float(e.rewards[t]))
                goal = pos[t, 1, :2]
                d_now = np.linalg.norm(pos[t, 2, :2] - goal)
                d_pred = np.linalg.norm(pred[:, 2, :2] - goal, axis=1)  # predicted cube-goal distance per action
                rec["spread_cm"].append(float(100 * np.ptp(d_pred)))  # how much the action matters, to the model
                rec["closer_pred_cm"].append(float(100 * (d_now - d_pred[a])))
                rec["closer_real_cm"].append(float(100 * (d_now - np.linalg.norm(pos[t + 1, 2, :2] - goal))))
                rec["cube_step_cm"].append(float(100 * np.linalg.norm(real_d_tgt)))
                rec["tcp_step_cm"].append(float(100 * np.linalg.norm(pos[t + 1, 0, :2] - pos[t, 0, :2])))
    r = {k: np.array(v, dtype=float) for k, v in rec.items()}
    con = r["contact"] > 0
    rr, rp = r["rew_real"], r["rew_pred"]

    def med(x):
        x = x[np.isfinite(x)]
        return round(float(np.median(x)), 3) if len(x) else None

    return {
        "transitions": int(len(con)), "contact_steps": int(con.sum()),
        "cube_displacement_cosine_median_at_contact": med(r["tgt_cos"][con]),
        "cube_displacement_cosine_gt_0.7_at_contact": round(float((r["tgt_cos"][con] > 0.7).mean()), 3) if con.any() else None,
        "cube_displacement_length_ratio_median_at_contact": med(r["tgt_len_ratio"][con]),
        "robot_displacement_cosine_median": med(r["rob_cos"]),
        "reward_abs_error_at_contact": round(float(np.abs(rp - rr)[con].mean()), 4) if con.any() else None,
        "reward_abs_error_elsewhere": round(float(np.abs(rp - rr)[~con].mean()), 4),
        "reward_real_std_at_contact": round(float(rr[con].std()), 4) if con.any() else None,
        "reward_corr_at_contact": round(float(np.corrcoef(rp[con], rr[con])[0, 1]), 3) if con.sum() > 2 else None,
        "cube_step_cm_median_at_contact": med(r["cube_step_cm"][con]),
        "tcp_step_cm_median": med(r["tcp_step_cm"]),
        # of the cube's step at contact, the part along the goal direction (towards +, away -)
        "closer_to_goal_cm_median_at_contact": med(r["closer_real_cm"][con]),
        "abs_closer_over_step_median_at_contact": med(np.abs(r["closer_real_cm"][con]) / r["cube_step_cm"][con])
        if con.any() else None,
        # the acted action's predicted vs real change of the cube-goal distance
        "goal_distance_change_corr_at_contact": round(float(np.corrcoef(r["closer_pred_cm"][con],
                                                                        r["closer_real_cm"][con])[0, 1]), 3)
        if con.sum() > 2 else None,
        # max - min over the 8 actions of the predicted cube-goal distance after the step
        "goal_distance_spread_across_actions_cm_median": {"contact": med(r["spread_cm"][con]),
                                                          "elsewhere": med(r["spread_cm"][~con])},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", required=True, help="edge train world-model --obs oracle --task push3 runs")
    ap.add_argument("--tail", type=int, default=40, help="replay episodes (the last ones) for the model checks")
    ap.add_argument("--out", type=writable_file, default="benchmarks/results/wm_push_diagnosis.json")
    args = ap.parse_args(argv)
    if args.tail < 1:
        ap.error(f"--tail {args.tail}: must be >= 1")
    import torch

    from world_models.object_env import ObjectTaskConfig
    from world_models.train import STATE_FILE

    res = {"command": "python " + " ".join([sys.argv[0], *(argv if argv is not None else sys.argv[1:])]),
           "machine": machine_info(), "git_revision": git_revision(), "runs": {}}
    for run in args.runs:  # every run checked before the first is analysed
        if not (Path(run) / STATE_FILE).is_file():
            ap.error(f"--runs {run}: no {STATE_FILE} there (an `edge train world-model` directory)")
        man = Path(run) / "manifest.json"  # a finished run's settings, read without loading its state
        cfg = json.loads(man.read_text()).get("config", {}) if man.is_file() else {}
        if cfg and (cfg.get("obs") != "oracle" or cfg.get("env", {}).get("task") != "push3"):
            ap.error(f"--runs {run}: obs={cfg.get('obs')}, task={cfg.get('env', {}).get('task')}; "
                     "this needs an oracle push3 run")
        try:
            atomic.verify_torch_file(Path(run) / STATE_FILE, ValueError, "--runs")
        except ValueError as e:
            ap.error(str(e))
    for run in args.runs:
        p = Path(run)
        blob = torch.load(p / STATE_FILE, weights_only=False)
        cfg = blob["config"]
        if cfg.get("obs") != "oracle" or cfg["env"]["task"] != "push3":
            ap.error(f"--runs {run}: obs={cfg.get('obs')}, task={cfg['env']['task']}; this needs an oracle push3 run")
        t0 = time.perf_counter()
        eps = blob["replay"]
        feats = len(ObjectTaskConfig(**cfg["env"]).oracle_layout)
        res["runs"][run] = {"env_steps": blob["st"]["env_steps"], "replay_episodes": len(eps),
                            "behaviour": behaviour(eps, cfg["seed"], feats),
                            "model_on_last_episodes": {"episodes": min(args.tail, len(eps)),
                                                       **model_checks(p, eps[-args.tail:], cfg["seed"], feats)}}
        res["runs"][run]["wall_s"] = round(time.perf_counter() - t0, 1)
        print(json.dumps({run: res["runs"][run]}, indent=1))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
