"""The vision stages of VLA training, before the flow loss: localisation pre-training of the front
trunk on pre-lift frames, the scene locator, freezing, and the held-out localisation check
(see :mod:`edge.training.vla.train` for why they exist). A mixin of :class:`VLATrainer`: the
methods read the trainer's config, model, data and RNG state."""

from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np
import torch

from edge.training.vla.config import HELDOUT_SCENES, warmup_cosine
from edge.training.vla.data import BatchOrder, before_lift, random_shift

log = logging.getLogger(__name__)


class VisionStages:
    """``_pretrain_vision``, ``_train_locator``, ``_freeze_locator``, ``_episode_scene_memory``,
    ``_freeze_vision``, ``_heldout_localisation`` (mixed into the trainer)."""

    config: Any
    model: Any

    def _pretrain_vision(self) -> None:
        """Localisation-only training of the front trunk on pre-lift frames (see module docstring;
        with ``vision_pretrain_base_after_lift`` the base-block outputs on every frame)."""
        from tqdm import tqdm

        c, m = self.config, self.model
        pre_lift = before_lift(self.data.aux_objects, self.data.episode_end)
        # the moved block's outputs learn on pre-lift frames only; with base_after_lift, the base
        # block's outputs learn on every frame (a per-output mask on one batch)
        frames = (np.arange(self.data.n_frames) if c.vision_pretrain_base_after_lift
                  else np.flatnonzero(pre_lift))
        front = "front" in c.vision_pretrain_parts
        wrist = self.wrist_aux is not None and "wrist" in c.vision_pretrain_parts
        params = [*m.lang_proj.parameters(), *m.trunks["front"].parameters(), *m.aux_head.parameters()] if front else []
        if wrist:
            params += [*m.trunks["wrist"].parameters(), *m.wrist_head.parameters()]
        opt = torch.optim.AdamW(params, lr=c.vision_pretrain_lr, weight_decay=c.weight_decay)
        order = BatchOrder(len(frames), c.batch_size, c.seed + 1)
        # the wrist head learns on every frame: after the lift it still has to find the base block
        wrist_order = BatchOrder(self.data.n_frames, c.batch_size, c.seed + 2)
        aux_std = torch.from_numpy(self.aux_std[:2])
        aux_base_std = torch.from_numpy(self.aux_std[3:5])
        m.train()
        t0, curve, window = time.perf_counter(), [], []
        for s in tqdm(range(c.vision_pretrain_steps), disable=not self.progress, unit="step",
                      desc="pretrain vision", mininterval=1.0, dynamic_ncols=True):
            gen = torch.Generator().manual_seed(c.seed * 1_000_003 + 1_000_000_000 + s)
            idx = frames[order.next()]
            target = torch.from_numpy(self.aux[idx])
            before = torch.from_numpy(pre_lift[idx])
            loss, pred = torch.zeros(()), torch.full_like(target, float("nan"))
            if front:
                image = random_shift(torch.from_numpy(self.data.images["front"][idx]), self._shift("front"), gen)
                pred = m.locate_objects(image, self.lang_table[torch.from_numpy(self.data.instruction_index[idx])])
                mask = torch.ones_like(target)
                mask[:, :3] = before[:, None].to(mask.dtype)
                loss = ((pred - target) ** 2 * mask).sum() / mask.sum()
            wrist_err = held_err = None
            if wrist:
                widx = wrist_order.next()
                wimg = random_shift(torch.from_numpy(self.data.images["wrist"][widx]), self._shift("wrist"), gen)
                wpred = m.locate_from_wrist(wimg, self.lang_table[torch.from_numpy(self.data.instruction_index[widx])])
                wtarget = torch.from_numpy(self.wrist_aux[widx])
                loss = loss + torch.nn.functional.mse_loss(wpred, wtarget)
                # moved object's offset error in metres (targets are decimetres)
                wrist_err = float(((wpred.detach()[:, :3] - wtarget[:, :3]) / 10.0).norm(dim=-1).median())
                # after the lift (the block in the hand): the in-hand offset, xy in the hand frame
                after = ~torch.from_numpy(pre_lift[widx])
                held_err = _median_norm((wpred.detach()[after, :2] - wtarget[after, :2]) / 10.0)
            for group in opt.param_groups:
                group["lr"] = warmup_cosine(c.vision_pretrain_lr, s, c.vision_pretrain_steps, 100, c.min_lr_ratio)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            # xy error of the moved object in metres, on this (augmented, training) batch
            # (and, after the lift, of the base block); nan where the batch has no such frame
            err = _median_norm((pred.detach()[before, :2] - target[before, :2]) * aux_std)
            base_err = _median_norm((pred.detach()[~before, 3:5] - target[~before, 3:5]) * aux_base_std)
            window.append((float(loss.detach()), err, np.nan if wrist_err is None else wrist_err, base_err,
                           np.nan if held_err is None else held_err))
            if (s + 1) % c.log_every_steps == 0 or s + 1 == c.vision_pretrain_steps:
                loss_w, err_w, werr_w, berr_w, herr_w = (float(np.nanmean(col)) if not np.isnan(col).all()
                                                         else np.nan for col in np.asarray(window, float).T)
                point = {"step": s + 1, "loss": float(loss_w), "moved_xy_error_m": float(err_w)}
                if wrist:
                    point["wrist_moved_offset_error_m"] = float(werr_w)
                    point["wrist_in_hand_xy_error_m"] = float(herr_w)
                if c.vision_pretrain_base_after_lift:
                    point["base_after_lift_xy_error_m"] = berr_w
                curve.append(point)
                window = []
        self.ema.load_state_dict(m.state_dict())
        heldout = self._heldout_localisation()
        self.pretrain = {"steps": c.vision_pretrain_steps, "frames": len(frames),
                         "wall_s": round(time.perf_counter() - t0, 1), "curve": curve,
                         "heldout_first_frame_xy_error_m": heldout}
        if front:
            log.info("vision pre-training: %d steps on %d %s; moved-object xy error %.3f m on training "
                     "batches%s, %s m on the first frame of %d held-out scenes",
                     c.vision_pretrain_steps, len(frames),
                     "frames (pre-lift ones for the moved block)" if c.vision_pretrain_base_after_lift
                     else "pre-lift frames", curve[-1]["moved_xy_error_m"] if curve else float("nan"),
                     f", base after the lift {curve[-1]['base_after_lift_xy_error_m']:.3f} m"
                     if curve and c.vision_pretrain_base_after_lift else "",
                     None if heldout is None else round(heldout, 4), HELDOUT_SCENES)
        if wrist and curve:
            log.info("vision pre-training (wrist): offset of the block to move %.4f m, in the hand after "
                     "the lift %.4f m (xy) on training batches", curve[-1]["wrist_moved_offset_error_m"],
                     curve[-1]["wrist_in_hand_xy_error_m"])
        self._freeze_vision()

    def _train_locator(self) -> None:
        """Train the scene locator alone on the scene datasets (their last 5 % held out), then
        freeze it. Its error on the held-out scenes goes to the manifest."""
        from tqdm import tqdm

        c, loc = self.config, self.model.locator
        sc = self.scenes
        n = len(sc["objects"])
        n_val = max(1, n // 20)
        train_idx, val_idx = np.arange(n - n_val), np.arange(n - n_val, n)
        objects = torch.from_numpy(sc["objects"])
        mean, std = objects[train_idx].mean(0), objects[train_idx].std(0).clamp_min(1e-3)
        loc.mean.copy_(mean)
        loc.std.copy_(std)
        names = sorted(set(sc["instruction"].tolist()))
        table = torch.tensor(np.stack([self.spec.instruction_embeddings[t] for t in names]), dtype=torch.float32)
        lang_idx = torch.from_numpy(np.searchsorted(np.asarray(names), sc["instruction"]))
        images = torch.from_numpy(sc["front"])
        opt = torch.optim.AdamW(loc.parameters(), lr=c.locator_lr, weight_decay=c.weight_decay)
        order = BatchOrder(len(train_idx), c.batch_size, c.seed + 3)
        target = (objects - mean) / std

        def heldout() -> dict[str, float]:
            loc.eval()
            with torch.no_grad():
                pred = torch.cat([loc(images[val_idx[i:i + 256]], table[lang_idx[val_idx[i:i + 256]]])
                                  for i in range(0, n_val, 256)])
            loc.train()
            err = pred - objects[val_idx]
            return {"heldout_moved_xy_error_m": float(err[:, 0:2].norm(dim=-1).median()),
                    "heldout_base_xy_error_m": float(err[:, 3:5].norm(dim=-1).median()),
                    "heldout_base_xy_error_p90_m": float(err[:, 3:5].norm(dim=-1).quantile(0.9))}

        loc.train()
        t0, curve, window = time.perf_counter(), [], []
        for s in tqdm(range(c.locator_steps), disable=not self.progress, unit="step",
                      desc="train scene locator", mininterval=1.0, dynamic_ncols=True):
            idx = torch.from_numpy(train_idx[order.next()])
            for group in opt.param_groups:
                group["lr"] = warmup_cosine(c.locator_lr, s, c.locator_steps, 200, c.min_lr_ratio)
            loss = ((loc.normalised(images[idx], table[lang_idx[idx]]) - target[idx]) ** 2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            window.append(float(loss.detach()))
            if (s + 1) % (c.log_every_steps * 10) == 0 or s + 1 == c.locator_steps:
                curve.append({"step": s + 1, "loss": float(np.mean(window)), **heldout()})
                window = []
        self.ema.locator.load_state_dict(loc.state_dict())
        baseline = float((objects[val_idx, 3:5] - mean[3:5]).norm(dim=-1).median())
        self.locator_record = {"steps": c.locator_steps, "scenes": n - n_val, "heldout_scenes": n_val,
                               "mean_position_baseline_base_xy_error_m": baseline,
                               "data": list(c.scene_data), "sha256": self.scenes_hash,
                               "wall_s": round(time.perf_counter() - t0, 1), "curve": curve,
                               **(curve[-1] if curve else {})}
        log.info("scene locator: %d steps on %d scenes; on %d held-out scenes the base block is "
                 "%.4f m off (median), the block to move %.4f m", c.locator_steps, n - n_val, n_val,
                 self.locator_record.get("heldout_base_xy_error_m", float("nan")),
                 self.locator_record.get("heldout_moved_xy_error_m", float("nan")))
        self.scenes = None  # hundreds of MB, not needed any more
        self._freeze_locator()

    def _freeze_locator(self) -> None:
        self.model.locator.requires_grad_(False)

    def _episode_scene_memory(self) -> np.ndarray:
        """(N, 6): for every training frame, the (frozen) locator's output on its episode's first
        frame: what the runtime policy remembers during that episode."""
        d, loc = self.data, self.model.locator
        ends = np.unique(d.episode_end)
        starts = np.concatenate([[0], ends[:-1]])
        first = starts[np.searchsorted(ends, d.episode_end)]  # (N,) first frame of each frame's episode
        lang = self.lang_table[torch.from_numpy(d.instruction_index[starts])]
        loc.eval()
        with torch.no_grad():
            mem = torch.cat([loc(torch.from_numpy(d.images["front"][starts[i:i + 256]]), lang[i:i + 256])
                             for i in range(0, len(starts), 256)]).numpy().astype(np.float32)
        if d.aux_objects is not None:
            err = np.linalg.norm(mem[:, 3:5] - d.aux_objects[starts, 3:5], axis=-1)
            log.info("scene memory of %d training episodes: base block %.4f m off (median)",
                     len(starts), float(np.median(err)))
        return mem[np.searchsorted(starts, first)]

    def _freeze_vision(self) -> None:
        if not self.config.vision_freeze:
            return
        m = self.model
        modules = [m.lang_proj, m.trunks["front"], m.aux_head]
        if m.wrist_head is not None:
            modules += [m.trunks["wrist"], m.wrist_head]
        for module in modules:
            module.requires_grad_(False)  # AdamW skips parameters without gradients (no decay either)
        self._vision_frozen = True

    def _heldout_localisation(self) -> float | None:
        """Median xy error (m) of the aux head's moved-object estimate on the first frame of
        ``HELDOUT_SCENES`` evaluation scenes (env seeds disjoint from the demos), or None where the
        simulator or the task's object order is unavailable."""
        from edge.training.vla.rollout import sim_unavailable_reason

        if sim_unavailable_reason() or self.data.meta.get("sim") not in ("mujoco", "pybullet"):
            return None
        import sim

        c, m = self.config, self.model
        env = sim.make_env(task=self.task, sim=c.eval_sim)
        errors = []
        try:
            for i in range(HELDOUT_SCENES):
                obs, info = env.reset(seed=c.eval_seed + i)
                order = getattr(getattr(env.unwrapped, "spec_task", None), "order", None)
                lang = self.spec.instruction_embeddings.get(obs["instruction"])
                if order is None or len(order) < 2 or lang is None:
                    continue
                with torch.no_grad():
                    pred = m.locate_objects(torch.from_numpy(np.asarray(obs["front"]))[None],
                                            torch.tensor([lang], dtype=torch.float32))
                xy = pred[0, :2].numpy() * self.aux_std[:2] + self.aux_mean[:2]
                errors.append(float(np.linalg.norm(xy - np.asarray(info["object_poses"][order[1]][:2]))))
        finally:
            env.close()
        return float(np.median(errors)) if errors else None


def _median_norm(diff: torch.Tensor) -> float:
    """Median row norm of (B, D) differences; nan for an empty batch."""
    return float(diff.norm(dim=-1).median()) if len(diff) else float("nan")
