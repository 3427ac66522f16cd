"""The world model over state tokens: COMET (slots + action-fused tokens) and its baselines.

One class, five variants (``WorldModelConfig.kind``), so every method runs through the same
pipeline, losses and planner:

============== ===================== ================== ===================== ==================
kind           state tokens per step action             next-state head       policy / value
============== ===================== ================== ===================== ==================
comet          K frozen slots        fused per slot     per slot, from u^k    object-causal
comet_nofusion K frozen slots        one action token   per slot, late fusion object-causal
comet_nocausal K frozen slots        fused per slot     per slot, from u^k    mean-pool + MLP
flat_slots     1 (K·D flattened)     one action token   from the action token MLP
pixels         1 (CNN latent)        one action token   from the action token MLP
============== ===================== ================== ===================== ==================

Token layout of step t (block t), with N state tokens: COMET ``[s^1..s^N, u^1..u^N]`` where
u^k = F([s^k; e(a_t)]); otherwise ``[s^1..s^N, a_t]``. One learned position embedding per block,
none per slot. The attention mask (:func:`attention_mask`) is the note's structured mask:

* same step: a slot token sees every slot token; a fused token u^k sees every slot token and
  itself, no other fused token (an action token sees the state tokens and itself);
* earlier steps: a slot token s^k sees every earlier slot token and only its own object's
  earlier fused tokens u^k; a fused token sees every earlier slot token (an action token, and
  a slot token in the unfused layouts, see every earlier token).

Shapes: ``z`` (B, L, N, Dz) state vectors (slots: N=K, Dz=D; flat: N=1, Dz=K·D; pixels: the
encoder's latent, N=1, Dz=width), ``actions`` (B, L) int64 (a_t follows z_t; the last one may be
a dummy), ``valid`` (B, L) bool (False for left padding). Outputs per block: predicted next state
(B, L, N, Dz) (residual: z_t + Δ, Δ's last layer zero-initialised), reward logits (B, L, S),
policy logits (B, L, A), value logits (B, L, S), relevance (B, L, N, 2) for policy and value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import nn

from edge.config import ConfigError
from world_models.support import Support

KINDS = ("comet", "comet_nofusion", "comet_nocausal", "flat_slots", "pixels")


@dataclass(frozen=True)
class WorldModelConfig:
    """World-model settings (validated; messages name key, value and range)."""

    kind: str = "comet"  # one of KINDS
    num_slots: int = 6  # K slots from the encoder (oracle mode: the number of entities)
    slot_dim: int = 64  # D of one slot
    width: int = 64  # transformer width (COMET: = slot_dim, no input projection)
    layers: int = 2
    heads: int = 4
    head_heads: int = 2  # attention heads of the object-causal policy/value heads
    num_actions: int = 8
    max_blocks: int = 16  # position embeddings: context + unroll + n-step
    support_lim: float = 1.5  # reward/value support, in h-space (±5.25 in returns)
    support_n: int = 61
    image_size: int = 64  # pixels only
    cnn_channels: int = 32  # pixels only: channels of the first conv (doubled twice)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"kind={self.kind!r} is not allowed; choose one of {KINDS}")
        for key, (lo, hi) in {"num_slots": (1, 32), "slot_dim": (2, 1024), "width": (8, 1024), "layers": (1, 12),
                              "heads": (1, 16), "head_heads": (1, 16), "num_actions": (2, 64),
                              "max_blocks": (2, 256), "support_n": (3, 1001), "image_size": (16, 256)}.items():
            v = getattr(self, key)
            if not lo <= v <= hi:
                raise ConfigError(f"{key}={v!r} is out of range; allowed [{lo}, {hi}]")
        if self.width % self.heads or self.width % self.head_heads:
            raise ConfigError(f"width={self.width} must be divisible by heads={self.heads} "
                             f"and head_heads={self.head_heads}")

    @property
    def fusion(self) -> bool:
        return self.kind in ("comet", "comet_nocausal")

    @property
    def causal_heads(self) -> bool:
        return self.kind in ("comet", "comet_nofusion")

    @property
    def tokens(self) -> int:
        """State tokens per step (N)."""
        return self.num_slots if self.kind.startswith("comet") else 1

    @property
    def state_dim(self) -> int:
        """Dz of one state token's vector."""
        return {"flat_slots": self.num_slots * self.slot_dim, "pixels": self.width}.get(self.kind, self.slot_dim)


@lru_cache(maxsize=64)
def attention_mask(n_blocks: int, n_state: int, fusion: bool) -> torch.Tensor:
    """(T, T) bool, True = query (row) may attend to key (column); T = n_blocks · tokens per block."""
    per = 2 * n_state if fusion else n_state + 1
    idx = torch.arange(n_blocks * per)
    block, pos = idx // per, idx % per
    is_act = pos >= n_state
    obj = torch.where(is_act, pos - n_state if fusion else torch.full_like(pos, -1), pos)
    bq, bk = block[:, None], block[None, :]
    aq, ak = is_act[:, None], is_act[None, :]
    same_obj = obj[:, None] == obj[None, :]
    same, earlier = bq == bk, bk < bq
    ss, su, us, uu = ~aq & ~ak, ~aq & ak, aq & ~ak, aq & ak
    if fusion:
        allowed = (same & (ss | us | (uu & same_obj))) | (earlier & (ss | (su & same_obj) | us))
    else:
        allowed = (same & (ss | us | uu)) | earlier
    return allowed


def mlp(d_in: int, d_hidden: int, d_out: int, zero_last: bool = False) -> nn.Sequential:
    last = nn.Linear(d_hidden, d_out)
    if zero_last:
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
    return nn.Sequential(nn.LayerNorm(d_in), nn.Linear(d_in, d_hidden), nn.LayerNorm(d_hidden), nn.GELU(), last)


class Block(nn.Module):
    """Pre-LN transformer block with an explicit boolean mask."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, t, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, w))
        return x + self.mlp(self.ln2(x))


class ObjectCausalHead(nn.Module):
    """One attention layer over [CLS, h^1..h^N] whose softmax is gated by per-slot relevance p.

    M(CLS, CLS) = 1, M(CLS, k) = p_k, M(k, CLS) = 0, M(k, l) = p_k p_l + (1 − p_k)(1 − p_l);
    Ã = A ⊙ M / Σ_j (A ⊙ M). p_k = sigmoid(MLP(h^k)), learned through this head's loss (and the
    learner's optional ``relevance_l1`` prior).
    """

    def __init__(self, width: int, heads: int, d_out: int) -> None:
        super().__init__()
        self.heads = heads
        self.cls = nn.Parameter(torch.randn(width) * 0.02)
        self.relevance = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, 1))
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.out = mlp(width, 4 * width, d_out)

    @staticmethod
    def gate(p: torch.Tensor) -> torch.Tensor:
        """(B, N) relevance -> (B, N+1, N+1) multiplicative attention gate M."""
        ones, zeros = torch.ones_like(p[:, :1]), torch.zeros_like(p[:, :1])
        is_cls = torch.cat([ones, torch.zeros_like(p)], 1)
        w = torch.stack([is_cls, torch.cat([zeros, p], 1), torch.cat([zeros, 1 - p], 1)], -1)  # (B, N+1, 3)
        g = torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], device=p.device)
        return w @ g @ w.transpose(1, 2)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h (B, N, W) -> (out (B, d_out), relevance (B, N))."""
        b, n, w = h.shape
        p = torch.sigmoid(self.relevance(h)).squeeze(-1)
        x = torch.cat([self.cls.expand(b, 1, w), h], 1)
        q, k, v = self.qkv(self.ln1(x)).view(b, n + 1, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(w // self.heads), -1)
        a = a * self.gate(p).unsqueeze(1)
        a = a / a.sum(-1, keepdim=True).clamp_min(1e-9)
        x = x + self.proj((a @ v).transpose(1, 2).reshape(b, n + 1, w))
        x = x + self.mlp(self.ln2(x))
        return self.out(x[:, 0]), p


class PixelEncoder(nn.Module):
    """(B, S, S, 3) uint8 -> (B, width) latent: 4 stride-2 convs, a linear layer, LayerNorm."""

    def __init__(self, image_size: int, channels: int, width: int) -> None:
        super().__init__()
        c = channels
        self.net = nn.Sequential(nn.Conv2d(3, c, 4, 2, 1), nn.GELU(), nn.Conv2d(c, 2 * c, 4, 2, 1), nn.GELU(),
                                 nn.Conv2d(2 * c, 2 * c, 4, 2, 1), nn.GELU(), nn.Conv2d(2 * c, 4 * c, 4, 2, 1),
                                 nn.GELU(), nn.Flatten(), nn.Linear(4 * c * (image_size // 16) ** 2, width),
                                 nn.LayerNorm(width))

    @property
    def weight_frozen(self) -> bool:
        """True when no parameter takes gradients (a pretrained encoder frozen for world-model training)."""
        return not any(p.requires_grad for p in self.parameters())

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames.permute(0, 3, 1, 2).float() / 255.0)


class TokenWorldModel(nn.Module):
    """Dynamics, reward, policy and value over a window of state tokens (see module docstring)."""

    def __init__(self, cfg: WorldModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        w, n, dz = cfg.width, cfg.tokens, cfg.state_dim
        self.support = Support(cfg.support_lim, cfg.support_n)
        self.encoder = PixelEncoder(cfg.image_size, cfg.cnn_channels, w) if cfg.kind == "pixels" else None
        self.state_in = nn.Identity() if dz == w else nn.Linear(dz, w)
        self.action_emb = nn.Embedding(cfg.num_actions, w)
        self.pos = nn.Parameter(torch.randn(cfg.max_blocks, w) * 0.02)
        self.fuse = mlp(2 * w, 4 * w, w) if cfg.fusion else None
        self.blocks = nn.ModuleList(Block(w, cfg.heads) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(w)
        self.next_head = mlp(w if cfg.fusion or n == 1 else 2 * w, 4 * w, dz, zero_last=True)
        self.reward_head = mlp(w, 4 * w, cfg.support_n)
        if cfg.causal_heads:
            self.policy_head = ObjectCausalHead(w, cfg.head_heads, cfg.num_actions)
            self.value_head = ObjectCausalHead(w, cfg.head_heads, cfg.support_n)
        else:
            self.policy_head = mlp(w, 4 * w, cfg.num_actions)
            self.value_head = mlp(w, 4 * w, cfg.support_n)

    def encode_frames(self, frames: torch.Tensor) -> torch.Tensor:
        """pixels only: (B, S, S, 3) uint8 -> (B, 1, width)."""
        return self.encoder(frames).unsqueeze(1)

    def forward(self, z: torch.Tensor, actions: torch.Tensor, valid: torch.Tensor,
                heads: str = "all", branch: bool = False) -> dict[str, torch.Tensor]:
        """``heads``: "all" (every block), "last" (policy/value of the last block only), "none".

        ``branch``: also predict the last block's next state and reward for every action at once
        (``branch_next_z`` (B, A, N, Dz), ``branch_reward_logits`` (B, A, S)). The last block's
        fused (or action) tokens are seen by no other token, so A extra copies of them, one per
        action, each masked like the original, give exactly what A separate passes would; the
        search then needs one pass per expansion instead of COMET's two.
        """
        cfg = self.cfg
        b, L, n, _ = z.shape
        if L > cfg.max_blocks:
            raise ConfigError(f"window of {L} blocks exceeds max_blocks={cfg.max_blocks}")
        s = self.state_in(z) + self.pos[:L].view(1, L, 1, -1)  # (B, L, N, W)
        e = self.action_emb(actions)  # (B, L, W)
        x = torch.cat([s, self._act_tokens(s, e)], 2)  # (B, L, 2N or N+1, W)
        per = x.shape[2]
        T = L * per
        mask = attention_mask(L, n, cfg.fusion).to(z.device)
        key_ok = valid.repeat_interleave(per, 1)  # (B, T)
        x = x.reshape(b, T, -1)
        n_act = per - n  # action-side tokens per block: N fused or 1 action token
        if branch:
            A = cfg.num_actions
            e_all = self.action_emb.weight.unsqueeze(0).expand(b, A, -1)  # (B, A, W)
            xb = self._act_tokens(s[:, -1:].expand(-1, A, -1, -1), e_all, pos=L - 1)  # (B, A, n_act, W)
            x = torch.cat([x, xb.reshape(b, A * n_act, -1)], 1)
            mask = _branch_mask(mask, T, per, n, A)
            key_ok = torch.cat([key_ok, torch.ones(b, A * n_act, dtype=torch.bool, device=z.device)], 1)
        m = mask.unsqueeze(0) & key_ok.unsqueeze(1)
        # (a float identity compared with 0: ONNX Runtime has no boolean EyeLike for the exported graph)
        m = m | (torch.eye(m.shape[-1], device=z.device) > 0).unsqueeze(0)
        for blk in self.blocks:
            x = blk(x, m.unsqueeze(1))
        x = self.ln_f(x)
        xr = x[:, :T].view(b, L, per, -1)
        hs, ha = xr[:, :, :n], xr[:, :, n:]
        delta, rew_in = self._dynamics(hs, ha)
        out = {"next_z": z + delta, "reward_logits": self.reward_head(rew_in)}
        if branch:
            hb = x[:, T:].view(b, A, n_act, -1)
            d_b, r_b = self._dynamics(hs[:, -1:].expand(-1, A, -1, -1), hb)
            out["branch_next_z"] = z[:, -1:] + d_b  # (B, A, N, Dz)
            out["branch_reward_logits"] = self.reward_head(r_b)  # (B, A, S)
        if heads == "none":
            return out
        if heads == "last":
            hs, L = hs[:, -1:], 1
        flat = hs.reshape(b * L, n, -1)
        if cfg.causal_heads:
            pol, p_pi = self.policy_head(flat)
            val, p_v = self.value_head(flat)
            out["relevance"] = torch.stack([p_pi, p_v], -1).view(b, L, n, 2)
        else:
            pooled = flat.mean(1)
            pol, val = self.policy_head(pooled), self.value_head(pooled)
        out["policy_logits"] = pol.view(b, L, -1)
        out["value_logits"] = val.view(b, L, -1)
        return out

    def _act_tokens(self, s: torch.Tensor, e: torch.Tensor, pos: int | None = None) -> torch.Tensor:
        """State tokens s (B, L, N, W) and action embeddings e (B, L, W) -> (B, L, N or 1, W)."""
        if self.cfg.fusion:
            return self.fuse(torch.cat([s, e.unsqueeze(2).expand(-1, -1, s.shape[2], -1)], -1))
        p = self.pos[pos].view(1, 1, -1) if pos is not None else self.pos[: e.shape[1]].unsqueeze(0)
        return (e + p).unsqueeze(2)

    def _dynamics(self, hs: torch.Tensor, ha: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs of state tokens (B, L, N, W) and action-side tokens -> (Δz, reward-head input)."""
        if self.cfg.fusion:
            return self.next_head(ha), ha.sum(2)
        if hs.shape[2] == 1:
            return self.next_head(ha), ha[:, :, 0]
        return self.next_head(torch.cat([hs, ha.expand(-1, -1, hs.shape[2], -1)], -1)), ha[:, :, 0]


def _branch_mask(mask: torch.Tensor, T: int, per: int, n: int, A: int) -> torch.Tensor:
    """Extend the (T, T) mask with A copies of the last block's action-side tokens (rows and columns
    appended): copy (a, j) attends like the original token j of the last block, except that its
    "itself" is the copy; no original token attends to a copy."""
    n_act = per - n
    X = A * n_act
    out = torch.zeros(T + X, T + X, dtype=torch.bool)
    out[:T, :T] = mask
    last0 = T - per  # first token of the last block
    orig = last0 + n + torch.arange(n_act).repeat(A)  # (X,) the original each copy mirrors
    rows = mask[orig].clone()
    rows[torch.arange(X), orig] = False  # not the original, but ...
    out[T:, :T] = rows
    out[T + torch.arange(X), T + torch.arange(X)] = True  # ... itself
    return out
