"""The von Mises-Fisher pieces of the R&R VAE: the latent's prior and posterior samples
(Wood's rejection sampler for the direction, a uniform norm below ``max_norm``) and the
reference's KL term."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def sample_vmf_prior(batch: int, dim: int, max_norm: float, device=None) -> Tensor:
    direction = F.normalize(torch.randn(batch, dim, device=device), dim=1)
    return direction * (max_norm * torch.rand(batch, 1, device=device))


def sample_vmf_posterior(mu: Tensor, kappa: float, max_norm: float, eps: float) -> Tensor:
    """Direction ~ vMF(mu/|mu|, kappa) by Wood's rejection sampler; norm =
    min(|mu|, max_norm - eps) + eps * U(0, 1)."""
    B, p = mu.shape
    mu = mu + 1e-18 * torch.randn_like(mu)
    norm = mu.norm(dim=1, keepdim=True)
    mu_hat = mu / norm.clamp_min(1e-30)
    w = _wood_sample(B, p, kappa, mu.device)[:, None]
    v = torch.randn_like(mu)
    v = v - (v * mu_hat).sum(1, keepdim=True) * mu_hat.detach()  # Gram-Schmidt
    v = F.normalize(v, dim=1)
    direction = w * mu_hat + torch.sqrt((1 - w ** 2).clamp_min(0)) * v
    new_norm = torch.clamp(norm, max=max_norm - eps) + eps * torch.rand_like(norm)
    return direction * new_norm


def _wood_sample(n: int, p: int, kappa: float, device=None) -> Tensor:
    b = (p - 1) / (math.sqrt(4 * kappa ** 2 + (p - 1) ** 2) + 2 * kappa)
    x0 = (1 - b) / (1 + b)
    c = kappa * x0 + (p - 1) * math.log(1 - x0 ** 2)
    beta = torch.distributions.Beta(torch.tensor((p - 1) / 2), torch.tensor((p - 1) / 2))
    w = torch.zeros(n, device=device)
    todo = torch.ones(n, dtype=torch.bool, device=device)
    while bool(todo.any()):  # rejection sampling: a few rounds at most
        s = beta.sample((n,)).to(device)
        cand = (1 - (1 + b) * s) / (1 - (1 - b) * s)
        u = torch.rand(n, device=device)
        ok = kappa * cand + (p - 1) * torch.log(1 - x0 * cand) - c >= torch.log(u)
        take = todo & ok
        w = torch.where(take, cand, w)
        todo = todo & ~ok
    return w


def log_bessel_iv(v: float, x: float, terms: int = 400) -> float:
    """log I_v(x) by its power series (float64, log-sum-exp); fine for the sizes here."""
    logs = [(2 * k + v) * math.log(x / 2) - math.lgamma(k + 1) - math.lgamma(k + v + 1)
            for k in range(terms)]
    m = max(logs)
    return m + math.log(sum(math.exp(a - m) for a in logs))


def vmf_kl(kappa: float, dim: int) -> float:
    """The reference's vMF KL term for latent size ``dim``:
    k I_{d/2+1}(k)/I_{d/2}(k) + (d/2) log k - log I_{d/2}(k) - lgamma(d/2+1) - (d/2) log 2
    (the textbook KL(vMF || uniform) on the sphere S^{d+1}; >= 0, constant in training)."""
    d2 = dim / 2
    log_i = log_bessel_iv(d2, kappa)
    ratio = math.exp(log_bessel_iv(d2 + 1, kappa) - log_i)
    return kappa * ratio + d2 * math.log(kappa) - log_i - math.lgamma(d2 + 1) - d2 * math.log(2)
