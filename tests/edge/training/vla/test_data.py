import numpy as np
import torch

from edge.training.vla.data import BatchOrder, DemoSet, random_shift
from edge.training.vla.synthetic import write_synthetic_demos


def test_chunks_pad_with_last_action_and_mask_past_episode_end(tmp_path):
    data = DemoSet.load(write_synthetic_demos(tmp_path / "d", episodes=2, steps=10))
    assert data.n_frames == 20 and data.images["front"].shape == (20, 96, 96, 3)
    actions, mask = data.chunks(np.array([0, 7, 12]), horizon=6)
    assert actions.shape == (3, 6, 5) and mask.shape == (3, 6)
    np.testing.assert_array_equal(mask[0], 1)
    np.testing.assert_array_equal(mask[1], [1, 1, 1, 0, 0, 0])  # episode 0 ends at frame 10
    np.testing.assert_array_equal(actions[1, 3:], np.repeat(data.action[9:10], 3, axis=0))
    np.testing.assert_array_equal(actions[2], data.action[12:18])  # second episode, no leakage


def test_batch_order_resumes_exactly_across_epochs():
    a = BatchOrder(n=10, batch_size=4, seed=3)
    straight = [a.next() for _ in range(7)]
    b = BatchOrder(n=10, batch_size=4, seed=3)
    first = [b.next() for _ in range(3)]
    c = BatchOrder(n=10, batch_size=4, seed=3)
    c.load_state_dict(b.state_dict())
    resumed = first + [c.next() for _ in range(4)]
    for x, y in zip(straight, resumed):
        np.testing.assert_array_equal(x, y)
    seen = np.concatenate(straight[:2] + [straight[2][:2]])
    assert sorted(seen) == list(range(10))  # one epoch = a permutation


def test_random_shift_keeps_shape_and_is_seeded():
    img = torch.randint(0, 255, (3, 96, 96, 3), dtype=torch.uint8)
    a = random_shift(img, 4, torch.Generator().manual_seed(1))
    b = random_shift(img, 4, torch.Generator().manual_seed(1))
    assert a.shape == img.shape and a.dtype == torch.uint8
    assert torch.equal(a, b)
    assert torch.equal(random_shift(img, 0, torch.Generator()), img)


def test_object_roles_pick_the_moved_block_and_its_base():
    from edge.training.vla.data import object_roles

    t = np.linspace(0, 1, 5)[:, None]
    base = np.tile([0.5, 0.0, 0.02], (5, 1))
    top = np.array([0.4, 0.1, 0.02]) + t * (np.array([0.5, 0.0, 0.065]) - [0.4, 0.1, 0.02])
    distractor = np.tile([0.6, -0.15, 0.02], (5, 1))
    roles = object_roles(np.stack([distractor, base, top], axis=1).astype(np.float32))
    np.testing.assert_allclose(roles[:, :3], top, atol=1e-6)
    np.testing.assert_allclose(roles[:, 3:], base, atol=1e-6)


def test_before_lift_marks_frames_until_the_moved_block_rises():
    from edge.training.vla.data import before_lift

    z = np.array([0.02, 0.02, 0.025, 0.04, 0.06, 0.02, 0.02, 0.02])  # episode 1 lifts at t=3
    aux = np.zeros((8, 6), np.float32)
    aux[:, 2] = z
    ends = np.array([5, 5, 5, 5, 5, 8, 8, 8])  # episode 2 never lifts
    assert before_lift(aux, ends).tolist() == [True, True, True, False, False, True, True, True]


def test_load_many_concatenates_sets_in_order_with_episode_ends_offset(tmp_path):
    roots = [write_synthetic_demos(tmp_path / name, episodes=n, steps=6, seed=s)
             for name, n, s in (("a", 2, 0), ("b", 3, 1))]
    parts = [DemoSet.load(r) for r in roots]
    both = DemoSet.load_many(roots)
    assert both.n_frames == 30 and both.n_episodes == 5
    np.testing.assert_array_equal(both.images["front"],
                                  np.concatenate([p.images["front"] for p in parts]))
    np.testing.assert_array_equal(both.action, np.concatenate([p.action for p in parts]))
    np.testing.assert_array_equal(both.episode_end[12:], parts[1].episode_end + 12)
