"""EQRL: Elastic Queries RL — per query, the initial latent noise w, the denoising steps K and the
executed chunk length C for a frozen flow-matching VLA, learned with query-level macro-action SAC.

* :mod:`.config` — :class:`EqrlConfig` (every setting, with the ablation ``mode``).
* :mod:`.schedule` — the pure parts: unit <-> integer mapping of K and C, the difficulty prior and
  residual, the allocation score, the episode NFE budget (all numpy, tested).
* :mod:`.networks` — actor (tanh-Gaussian noise + sigmoid-Gaussian schedule heads), the Q^A
  ensemble over the executed chunk and the Q^W ensemble over (noise, schedule).
* :mod:`.agent` — the SAC learner: gamma^C backup, Q^W distilled from Q^A, difficulty from Q^W
  ensemble disagreement, running normalisation frozen for deployment.
* :mod:`.train` — collection in :class:`edge.runtime.query_env.QueryEnv` processes, replay of VLA
  features (not images), periodic evaluation, checkpoint + resume, manifest (``edge train adapter``).
* :mod:`.deploy` — :class:`EqrlScheduler` behind :class:`edge.contracts.Scheduler` and its
  registry factory (``edge run --scheduler eqrl``); the decision network runs in numpy or ONNX.

The VLA is never updated. May import ``edge`` (contracts, config, runtime) and ``torch``.
"""
