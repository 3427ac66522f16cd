"""The world model's token layout, attention mask, gating arithmetic and variants."""

import pytest
import torch

from world_models.support import Support
from world_models.token_model import (
    KINDS,
    ObjectCausalHead,
    TokenWorldModel,
    WorldModelConfig,
    attention_mask,
)


def _tiny(kind="comet", **kw):
    return WorldModelConfig(kind=kind, num_slots=3, slot_dim=8, width=8, heads=2, head_heads=2, support_n=11,
                            image_size=16, cnn_channels=4, **kw)


def test_fused_token_sees_exactly_what_the_note_says():
    K = 3
    m = attention_mask(2, K, True)  # blocks: [s1 s2 s3 u1 u2 u3] x 2

    def s(b, k):
        return b * 2 * K + k

    def u(b, k):
        return b * 2 * K + K + k

    for k in range(K):
        # same step: u^k sees every slot of its step and itself, no other fused token
        assert all(m[u(1, k), s(1, j)] for j in range(K))
        assert m[u(1, k), u(1, k)]
        assert not any(m[u(1, k), u(1, j)] for j in range(K) if j != k)
        # earlier step: u^k sees every earlier slot, no earlier fused token
        assert all(m[u(1, k), s(0, j)] for j in range(K))
        assert not any(m[u(1, k), u(0, j)] for j in range(K))
        # a slot sees all slots of its step, no fused token of its step
        assert all(m[s(1, k), s(1, j)] for j in range(K))
        assert not any(m[s(1, k), u(1, j)] for j in range(K))
        # earlier: all slots, only its own object's fused token
        assert all(m[s(1, k), s(0, j)] for j in range(K))
        assert m[s(1, k), u(0, k)] and not any(m[s(1, k), u(0, j)] for j in range(K) if j != k)
        # nothing sees the future
        assert not m[s(0, k), s(1, k)] and not m[u(0, k), s(1, 0)]
    assert int(m.sum()) == 2 * (K * K + K * (K + 1)) + K * (K + 1) + K * K  # per-rule count


def test_unfused_mask_action_token_and_slots():
    K = 2
    m = attention_mask(2, K, False)  # [s1 s2 a] x 2
    assert not m[0, 2] and m[2, 0] and m[2, 1] and m[2, 2]  # slots do not see their step's action
    assert m[3, 2] and m[3, 0] and m[5, 2]  # later tokens see everything earlier
    assert not m[2, 3]


def test_relevance_gate_arithmetic():
    p = torch.tensor([[0.9, 0.2]])
    g = ObjectCausalHead.gate(p)[0]
    want = torch.tensor([[1.0, 0.9, 0.2],
                         [0.0, 0.9 * 0.9 + 0.1 * 0.1, 0.9 * 0.2 + 0.1 * 0.8],
                         [0.0, 0.2 * 0.9 + 0.8 * 0.1, 0.2 * 0.2 + 0.8 * 0.8]])
    assert torch.allclose(g, want, atol=1e-6)


def test_zero_relevance_cuts_cls_reading_a_slot():
    torch.manual_seed(0)
    head = ObjectCausalHead(8, 2, 4)
    with torch.no_grad():  # force p ≈ 0 for every slot: the CLS token then reads only itself
        head.relevance[-1].weight.zero_()
        head.relevance[-1].bias.fill_(-30.0)
    h1, h2 = torch.randn(1, 3, 8), torch.randn(1, 3, 8)
    o1, p1 = head(h1)
    o2, _ = head(h2)
    assert float(p1.detach().max()) < 1e-6
    assert torch.allclose(o1, o2, atol=1e-5)  # the decision no longer depends on the slots


@pytest.mark.parametrize("kind", KINDS)
def test_every_variant_runs_and_is_causal_in_time(kind):
    torch.manual_seed(0)
    cfg = _tiny(kind)
    m = TokenWorldModel(cfg).eval()
    B, L = 2, 4
    if kind == "pixels":
        z = m.encode_frames(torch.randint(0, 255, (B * L, 16, 16, 3), dtype=torch.uint8)).view(B, L, 1, -1)
    else:
        z = torch.randn(B, L, cfg.tokens, cfg.state_dim)
    a = torch.randint(0, cfg.num_actions, (B, L))
    v = torch.ones(B, L, dtype=torch.bool)
    out = m(z.detach(), a, v)
    assert out["next_z"].shape == (B, L, cfg.tokens, cfg.state_dim)
    assert out["policy_logits"].shape == (B, L, cfg.num_actions)
    assert out["value_logits"].shape == out["reward_logits"].shape == (B, L, cfg.support_n)
    assert ("relevance" in out) == cfg.causal_heads
    # changing the last block's state/action changes nothing at earlier blocks
    z2, a2 = z.detach().clone(), a.clone()
    z2[:, -1] += 1.0
    a2[:, -1] = (a2[:, -1] + 1) % cfg.num_actions
    out2 = m(z2, a2, v)
    for key in ("next_z", "policy_logits", "value_logits", "reward_logits"):
        assert torch.allclose(out[key][:, :-1], out2[key][:, :-1], atol=1e-5), key
    # the policy at a block does not see that block's action (it is chosen from it)
    a3 = a.clone()
    a3[:, -1] = (a3[:, -1] + 3) % cfg.num_actions
    out3 = m(z.detach(), a3, v)
    assert torch.allclose(out["policy_logits"], out3["policy_logits"], atol=1e-5)
    assert not torch.allclose(out["reward_logits"][:, -1], out3["reward_logits"][:, -1])


def test_left_padding_is_invisible():
    torch.manual_seed(0)
    m = TokenWorldModel(_tiny()).eval()
    z = torch.randn(1, 4, 3, 8)
    a = torch.randint(0, 8, (1, 4))
    v = torch.tensor([[False, False, True, True]])
    z2 = z.clone()
    z2[:, :2] = torch.randn(1, 2, 3, 8) * 5
    o1, o2 = m(z, a, v), m(z2, a, v)
    assert torch.allclose(o1["policy_logits"][:, 2:], o2["policy_logits"][:, 2:], atol=1e-5)


def test_next_state_starts_as_identity_and_heads_last_matches():
    m = TokenWorldModel(_tiny()).eval()
    z = torch.randn(2, 3, 3, 8)
    a = torch.zeros(2, 3, dtype=torch.long)
    v = torch.ones(2, 3, dtype=torch.bool)
    out = m(z, a, v)
    assert torch.allclose(out["next_z"], z)  # zero-initialised residual head
    last = m(z, a, v, heads="last")
    assert torch.allclose(last["policy_logits"][:, 0], out["policy_logits"][:, -1], atol=1e-6)


def test_support_round_trip_and_range_error():
    s = Support(5.0, 41)
    x = torch.tensor([-3.0, -0.4, 0.0, 0.7, 2.5, 10.0])
    code = s.two_hot(x)
    assert torch.allclose(code.sum(-1), torch.ones(6))
    assert torch.allclose(s.decode(torch.log(code + 1e-12)), x, atol=1e-3)
    with pytest.raises(ValueError, match="support"):
        s.two_hot(torch.tensor([1e4]))


def test_config_errors_name_the_key():
    with pytest.raises(ValueError, match="kind="):
        WorldModelConfig(kind="nope")
    with pytest.raises(ValueError, match="width"):
        WorldModelConfig(width=30, heads=4)
