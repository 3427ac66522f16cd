"""benchmarks/slot_owners.py: object shares per slot, owner changes, the robot by visible pixels."""

import json

import numpy as np
import pytest

from sim.backends.base import SEG_OBJECT0, SEG_ROBOT, SEG_TABLE
from tests.benchmarks._load import load_benchmark
from world_models.slot_metrics import owner_shares

so = load_benchmark("slot_owners")


def _scene():
    """One episode of 3 frames, 4x4 pixels, 3 slots: the robot moves from slot 1 to slot 0 (table's)."""
    seg = np.full((1, 3, 4, 4), SEG_TABLE)
    seg[0, :, 0, :] = SEG_ROBOT  # 4 robot pixels in every frame
    seg[0, :2, 3, 3] = SEG_OBJECT0  # the cube leaves the view in the last frame
    masks = np.zeros((1, 3, 3, 4, 4))
    masks[0, :, 0] = 1.0  # the table's slot everywhere...
    masks[0, :2, 1, 0, :3] = 2.0  # ...but slot 1 holds 3 of the robot's 4 pixels in frames 0-1
    masks[0, :2, 2, 3, 3] = 2.0  # slot 2 holds the cube
    return seg, masks


def test_owner_shares_per_frame():
    seg, masks = _scene()
    sh = owner_shares(seg, masks, (SEG_ROBOT, SEG_OBJECT0))
    assert sh.shape == (1, 3, 3, 2)
    np.testing.assert_allclose(sh[0, 0, :, 0], [0.25, 0.75, 0.0])
    np.testing.assert_allclose(sh[0, 2, :, 0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(sh[0, 1, :, 1], [0.0, 0.0, 1.0])
    assert np.isnan(sh[0, 2, :, 1]).all()  # the cube is not in the last frame
    with pytest.raises(ValueError, match="want seg"):
        owner_shares(seg[0], masks, (SEG_ROBOT,))


def test_summary_counts_owner_changes_and_bins_the_robot():
    seg, masks = _scene()
    res = so.summarise(seg, masks)
    robot, cube = res["objects"]["robot"], res["objects"]["cube0"]
    assert robot["frames_owned_per_slot"] == [1, 2, 0] and robot["owner_changes"] == 1 and robot["transitions"] == 2
    assert cube["frames"] == 2 and cube["owner_changes"] == 0 and cube["transitions"] == 1
    assert res["robot_by_visible_pixels"]["main_slot"] == 1
    (row,) = res["robot_by_visible_pixels"]["bins"]
    assert row["pixels"] == [1, 50] and row["frames"] == 3 and row["share_of_frames_owned_by_another_slot"] == 0.333


def test_main_on_a_tiny_encoder_and_bad_input(tmp_path, capsys):
    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, save_encoder
    from world_models.slot_pretrain import collect_frames

    save_encoder(SlotAutoencoder(SlotEncoderConfig(num_slots=3, slot_dim=8, cnn_channels=4, cnn_channels_wide=8,
                                                   mlp_hidden=8, decoder_channels=4)), tmp_path / "enc")
    collect_frames(8, 5, tmp_path / "d.npz", episode_len=4, progress=False)
    out = tmp_path / "o.json"
    assert so.main(["--encoder", str(tmp_path / "enc"), "--data", str(tmp_path / "d.npz"), "--out", str(out)]) == 0
    res = json.loads(out.read_text())
    assert res["episodes"] == 2 and res["frames_per_episode"] == 4 and "robot" in res["objects"]
    save_encoder(SlotAutoencoder(SlotEncoderConfig.tiny()), tmp_path / "enc32")  # reads 32² frames
    assert so.main(["--encoder", str(tmp_path / "enc32"), "--data", str(tmp_path / "d.npz"), "--out", str(out)]) == 2
    assert "--data" in (err := capsys.readouterr().err) and "32²" in err
    for bad, said in ((["--episodes", "0"], "--episodes 0"), (["--carry-iters", "11"], "--carry-iters 11"),
                      (["--data", str(tmp_path / "nope.npz")], "--data")):
        with pytest.raises(SystemExit) as e:
            so.main(["--encoder", str(tmp_path / "enc"), "--data", str(tmp_path / "d.npz"), *bad])
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_robot_foreground_counts_the_loss_foreground_cells_of_the_robot():
    frames = np.full((1, 2, 32, 32, 3), 120, np.uint8)
    seg = np.full((1, 2, 32, 32), SEG_TABLE)
    frames[0, 0, 4:8, 4:8] = 250  # a small bright robot: all of it stands out from its neighbourhood
    seg[0, 0, 4:8, 4:8] = SEG_ROBOT
    frames[0, 1, 2:30, 2:30] = 250  # a robot much larger than the 9x9 window: its interior does not
    seg[0, 1, 2:30, 2:30] = SEG_ROBOT
    share = so.robot_foreground(frames, seg, 32)
    assert share[0, 0] == 1.0 and 0.0 < share[0, 1] < 0.5
    seg[0, 0] = SEG_TABLE
    assert np.isnan(so.robot_foreground(frames, seg, 32)[0, 0])  # no robot cell
    fg = np.array([[0.2, 0.6, 1.0]])  # the summary's split by owner (the scene's robot: slot 1, 1, then 0)
    seg3, masks = _scene()
    fg[0, 0] = np.nan  # a frame without a robot cell at the loss's resolution is left out, and counted
    row = so.summarise(seg3, masks, fg)["robot_by_visible_pixels"]["bins"][0]["robot_cells_in_loss_foreground"]
    assert row["all"] == {"mean": pytest.approx(0.8), "frames": 2}
    assert row["main_slot_owns"] == {"mean": pytest.approx(0.6), "frames": 1}
    assert row["another_owns"] == {"mean": pytest.approx(1.0), "frames": 1}


def test_robot_foreground_downsamples_the_robot_to_the_loss_resolution():
    frames = np.full((1, 2, 64, 64, 3), 120, np.uint8)
    seg = np.full((1, 2, 64, 64), SEG_TABLE)
    seg[0, 0, 10:30, 20] = SEG_ROBOT  # one pixel wide: no 2x2 cell is more than half robot
    frames[0, 0, 10:30, 20] = 250
    seg[0, 1, 8:16, 8:16] = SEG_ROBOT  # 8x8 aligned: 4x4 cells at 32²
    frames[0, 1, 8:16, 8:16] = 250
    share = so.robot_foreground(frames, seg, 32)
    assert np.isnan(share[0, 0]) and share[0, 1] == 1.0


def test_picture_draws_the_frames_with_200_to_400_robot_pixels(tmp_path):
    import matplotlib.image

    seg = np.full((1, 3, 64, 64), SEG_TABLE)
    seg[0, 1, :16, :16] = SEG_ROBOT  # 256 robot pixels: drawn
    seg[0, 2, :4, :4] = SEG_ROBOT  # 16: not
    frames = np.zeros((1, 3, 64, 64, 3), np.uint8)
    masks = np.zeros((1, 3, 3, 32, 32))
    masks[0, :, 2] = 1.0  # slot 2 everywhere
    info = so.draw(str(tmp_path / "p.png"), frames, seg, masks, main_slot=2, scale=1)
    assert info["frames"] == [[0, 1]]
    img = matplotlib.image.imread(tmp_path / "p.png")
    assert img.shape[:2] == (64, 192)
    np.testing.assert_allclose(img[0, 64, :3], [1.0, 0.0, 1.0])  # the main slot in magenta
    np.testing.assert_allclose(img[0, 128, :3], [1.0, 1.0, 1.0])  # the robot's mask
    assert "note" in so.draw(str(tmp_path / "q.png"), frames[:, 2:], seg[:, 2:], masks[:, 2:], 2)
    assert not (tmp_path / "q.png").exists()
    masks[0, :, 2], masks[0, :, 0] = 0.0, 1.0
    so.draw(str(tmp_path / "z.png"), frames, seg, masks, main_slot=0, scale=1)  # the table's slot is the main one
    np.testing.assert_allclose(matplotlib.image.imread(tmp_path / "z.png")[0, 64, :3], [1.0, 0.0, 1.0])


def test_main_draws_the_picture_and_refuses_bad_picture_paths(tmp_path, capsys):
    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, save_encoder
    from world_models.slot_pretrain import collect_frames

    save_encoder(SlotAutoencoder(SlotEncoderConfig(num_slots=3, slot_dim=8, cnn_channels=4, cnn_channels_wide=8,
                                                   mlp_hidden=8, decoder_channels=4)), tmp_path / "enc")
    collect_frames(8, 5, tmp_path / "d.npz", episode_len=4, progress=False)
    base = ["--encoder", str(tmp_path / "enc"), "--data", str(tmp_path / "d.npz"), "--out", str(tmp_path / "o.json")]
    assert so.main([*base, "--picture", str(tmp_path / "pics" / "p.png")]) == 0
    res = json.loads((tmp_path / "o.json").read_text())
    assert res["picture"]["path"].endswith("p.png")  # drawn, or a note that no frame had 200-400 robot pixels
    assert (tmp_path / "pics" / "p.png").exists() == ("note" not in res["picture"])
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir.png").mkdir()
    for bad, said in ((str(tmp_path / "p.jpg"), "must be a .png"), (str(tmp_path / "adir.png"), "must be a .png"),
                      (str(tmp_path / "afile" / "p.png"), "is a file")):
        with pytest.raises(SystemExit) as e:
            so.main([*base, "--picture", bad])
        assert e.value.code == 2 and said in capsys.readouterr().err


def test_cells_foreground_window_threshold_and_moving_cells():
    frames = np.full((1, 3, 32, 32, 3), 120, np.uint8)
    seg = np.full((1, 3, 32, 32), SEG_TABLE)
    for t, x0 in enumerate((4, 4, 8)):  # a 12x12 robot that stays, then moves 4 cells right
        frames[0, t, 8:20, x0:x0 + 12] = 150
        seg[0, t, 8:20, x0:x0 + 12] = SEG_ROBOT
    narrow = so.cells_foreground(frames, seg, 32)  # the loss's 9x9 window: its interior is not foreground
    wide = so.cells_foreground(frames, seg, 32, window=31)  # the neighbourhood is mostly table
    assert (0.3 < narrow).all() and (narrow < 1.0).all() and (wide == 1.0).all()
    moving = so.cells_foreground(frames, seg, 32, threshold=0.1, moving=True)
    assert np.isnan(moving[0, 0]) and moving[0, 1] == 0.0  # no previous frame; nothing changed
    assert moving[0, 2] == pytest.approx(4 * 12 / (12 * 12))  # the 4 columns it moved into
    table = so.cells_foreground(frames, seg, 32, ids=(SEG_TABLE,))
    assert (table < 0.5).all()


def test_main_reads_rgbd_frames_with_either_encoder_and_refuses_rgb_frames_for_an_rgbd_one(tmp_path, capsys):
    from world_models.slot_encoder import SlotAutoencoder, SlotEncoderConfig, save_encoder
    from world_models.slot_pretrain import collect_frames

    small = dict(num_slots=3, slot_dim=8, cnn_channels=4, cnn_channels_wide=8, mlp_hidden=8, decoder_channels=4)
    save_encoder(SlotAutoencoder(SlotEncoderConfig(**small)), tmp_path / "rgb")
    save_encoder(SlotAutoencoder(SlotEncoderConfig(**small, in_channels=4)), tmp_path / "rgbd")
    collect_frames(8, 5, tmp_path / "d.npz", episode_len=4, progress=False)
    collect_frames(8, 5, tmp_path / "dd.npz", episode_len=4, progress=False, depth=True)
    got = {}
    for enc, data in (("rgb", "d.npz"), ("rgb", "dd.npz"), ("rgbd", "dd.npz")):
        out = tmp_path / f"{enc}_{data}.json"
        assert so.main(["--encoder", str(tmp_path / enc), "--data", str(tmp_path / data), "--out", str(out)]) == 0
        got[enc, data] = json.loads(out.read_text())["objects"]
    assert got["rgb", "d.npz"] == got["rgb", "dd.npz"]  # the colour channels of the RGB-D frames
    assert so.main(["--encoder", str(tmp_path / "rgbd"), "--data", str(tmp_path / "d.npz"),
                    "--out", str(tmp_path / "x.json")]) == 2
    assert "reads RGB-D (in_channels=4); collect with --depth" in capsys.readouterr().err
