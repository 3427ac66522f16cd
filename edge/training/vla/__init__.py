"""Training the reference VLA: demonstration data (:mod:`.data`), closed-loop evaluation and DAgger
rollouts in the simulator (:mod:`.rollout`), synthetic demos for tests (:mod:`.synthetic`), and the
trainer (:mod:`.config` settings, :mod:`.train` the loop, :mod:`.stages` the vision stages)."""
