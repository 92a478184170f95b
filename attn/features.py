"""Feature maps φ for linear attention: exp(q·k) is replaced by φ(q)·φ(k).

Every map here makes every weight φ(q)·φ(k) >= 0 (Taylor's features can be negative
one by one, but their product 1 + x + x²/2 is > 0).
They are applied to ``q·√s`` and ``k·√s`` (s = the attention scale, 1/√d by
default), so that φ(q)·φ(k) stands in for exp(s·q·k), the numerator of softmax.

* ``elu``    elu(x) + 1                                   m = d
* ``relu``   max(x, 0)                                    m = d
* ``favor``  Performer's positive random features
             exp(ωᵀx − ‖x‖²/2) / √m, ω orthogonal Gaussian     m = feature_dim (256)
             (computed in float64: ``working_dtype``)
* ``taylor`` 2nd-order Taylor of exp on x projected to r = 16 dimensions:
             [1, x', x'⊗x'/√2] with x' = Pᵀx, P Gaussian d×16 / √16
             so φ(q)·φ(k) = 1 + q'·k' + (q'·k')²/2 > 0     m = 1 + 16 + 256 = 273

The random maps draw their matrices from ``torch.Generator`` seeded by ``seed``:
the same seed gives the same φ for q and k and across calls.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable

import torch

FAVOR_DEFAULT_DIM = 256
TAYLOR_DIM = 16


@dataclass(frozen=True)
class FeatureMap:
    name: str
    formula: str
    latex: str
    size: Callable[[int, int | None], int]  # (d, feature_dim) -> m
    # make(q, k, root, feature_dim, seed) -> (φ for queries, φ for keys): functions of a
    # slice of q or k (any run of positions), so that a scan can apply φ chunk by chunk
    make: Callable[..., tuple[Callable, Callable]]
    random: bool = False
    # computed in float64 whatever the inputs: FAVOR+'s keys share one shift, so on a layer
    # with large scores the keys far below the largest underflow float32 (e^-87) and the
    # early rows of a causal scan, which see only those, lose their whole weight
    wide: bool = False


def _same_for_both(fn):
    def make(q, k, root, feature_dim=None, seed=0):
        phi = lambda x: fn(x * root)
        return phi, phi

    return make


# in place on x·√s, a fresh tensor: one pass and one allocation each
_elu_make = _same_for_both(lambda x: torch.nn.functional.elu_(x).add_(1.0))
_relu_make = _same_for_both(torch.relu_)


def _generator(seed: int) -> torch.Generator:
    g = torch.Generator(device="cpu")
    g.manual_seed(int(seed))
    return g


def orthogonal_gaussian(d: int, m: int, seed: int) -> torch.Tensor:
    """(d, m) random projection whose columns come in orthogonal blocks of d, each
    column's norm drawn like a Gaussian vector's (Performer's ORF)."""
    g = _generator(seed)
    blocks = []
    for _ in range(math.ceil(m / d)):
        a = torch.randn(d, d, generator=g, dtype=torch.float64)
        qmat, _ = torch.linalg.qr(a)
        blocks.append(qmat)
    omega = torch.cat(blocks, dim=1)[:, :m]
    norms = torch.randn(m, d, generator=g, dtype=torch.float64).norm(dim=1)
    return (omega * norms).to(torch.float32)


def _favor_make(q, k, root, feature_dim=None, seed=0):
    d = q.shape[-1]
    m = feature_dim or FAVOR_DEFAULT_DIM
    omega = orthogonal_gaussian(d, m, seed).to(device=q.device, dtype=q.dtype)  # (d, m)
    scale = 1.0 / math.sqrt(m)

    def exponent(x):  # ωᵀx − ‖x‖²/2, (b, h, r, m)
        x = x * root
        return x @ omega - (x * x).sum(-1, keepdim=True) / 2

    # Shifts that cancel in the ratio: per query row (each row is normalised on its
    # own), and one constant for all keys of a (batch, head) — their largest exponent,
    # found a chunk at a time (a per-key shift would change the weights).
    shift = None
    for s in range(0, k.shape[2], 4096):
        top = exponent(k[:, :, s:s + 4096]).amax(dim=(-2, -1), keepdim=True)
        shift = top if shift is None else torch.maximum(shift, top)

    def phi_q(x):
        e = exponent(x)
        return torch.exp(e - e.amax(dim=-1, keepdim=True)) * scale

    def phi_k(x):
        return torch.exp(exponent(x) - shift) * scale

    return phi_q, phi_k


def taylor_projection(d: int, seed: int) -> torch.Tensor:
    g = _generator(seed)
    return (torch.randn(d, TAYLOR_DIM, generator=g) / math.sqrt(TAYLOR_DIM)).to(torch.float32)


def _taylor_features(x: torch.Tensor) -> torch.Tensor:
    ones = torch.ones_like(x[..., :1])
    outer = (x[..., :, None] * x[..., None, :]).flatten(-2) / math.sqrt(2.0)
    return torch.cat([ones, x, outer], dim=-1)


def _taylor_make(q, k, root, feature_dim=None, seed=0):
    p = taylor_projection(q.shape[-1], seed).to(device=q.device, dtype=q.dtype) * root
    phi = lambda x: _taylor_features(x @ p)
    return phi, phi


FEATURE_MAPS: dict[str, FeatureMap] = {
    "elu": FeatureMap("elu", "φ(x) = elu(x) + 1", r"\phi(x) = \operatorname{elu}(x) + 1 \quad (m = d)",
                      lambda d, f: d, _elu_make),
    "relu": FeatureMap("relu", "φ(x) = max(x, 0)", r"\phi(x) = \max(x, 0) \quad (m = d)", lambda d, f: d, _relu_make),
    "favor": FeatureMap(
        "favor",
        "φ(x) = exp(ωᵀx − ‖x‖²/2) / √m",
        r"\phi(x) = \frac{1}{\sqrt{m}}\exp\!\big(\omega^\top x - \tfrac{\lVert x\rVert^2}{2}\big)"
        r" \quad (m = 256)",
        lambda d, f: f or FAVOR_DEFAULT_DIM,
        _favor_make,
        random=True,
        wide=True,
    ),
    "taylor": FeatureMap(
        "taylor",
        "φ(x) = [1, x′, x′⊗x′/√2],  x′ = Pᵀx ∈ ℝ¹⁶",
        r"\phi(x) = \big[1,\; x',\; \tfrac{x' \otimes x'}{\sqrt 2}\big],\; x' = P^\top x \in \mathbb{R}^{16}"
        r" \quad (m = 273)",
        lambda d, f: 1 + TAYLOR_DIM + TAYLOR_DIM * TAYLOR_DIM,
        _taylor_make,
        random=True,
    ),
}


def get_feature_map(name: str) -> FeatureMap:
    try:
        return FEATURE_MAPS[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown feature map {name!r}; choose one of {', '.join(FEATURE_MAPS)}"
        ) from None


def working_dtype(name: str, dtype: torch.dtype) -> torch.dtype:
    """The dtype a feature map is computed in for inputs of ``dtype``: float64 for a map
    whose values span more than float32 holds (``wide``: FAVOR+), else ``dtype``."""
    return torch.float64 if get_feature_map(name).wide else dtype


def feature_size(name: str, d: int, feature_dim: int | None = None) -> int:
    """m, the length of φ(x) for a head size d."""
    return get_feature_map(name).size(d, feature_dim)


def feature_functions(
    name: str, q: torch.Tensor, k: torch.Tensor, *, scale: float | None = None,
    feature_dim: int | None = None, seed: int = 0,
) -> tuple[Callable, Callable]:
    """(x ↦ φ(x·√s) for query slices, the same for key slices) of ``(b, h, r, d)``
    tensors; ``q`` and ``k`` are the whole tensors (FAVOR+ needs one look at every key)."""
    fmap = get_feature_map(name)
    if feature_dim is not None and (int(feature_dim) != feature_dim or feature_dim < 1):
        raise ValueError(f"feature_dim must be a whole number >= 1, got {feature_dim!r}")
    s = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return fmap.make(q, k, math.sqrt(s), feature_dim=feature_dim, seed=seed)


def apply_feature_map(
    name: str, q: torch.Tensor, k: torch.Tensor, *, scale: float | None = None,
    feature_dim: int | None = None, seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """φ(q·√s), φ(k·√s), each ``(b, h, n, m)``."""
    phi_q, phi_k = feature_functions(name, q, k, scale=scale, feature_dim=feature_dim, seed=seed)
    return phi_q(q), phi_k(k)
