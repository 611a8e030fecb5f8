"""Independent reference computations shared by tests (never calls attnflow's maths)."""

import numpy as np


def loglog_slope(hs, errors):
    """Least-squares slope of log(error) against log(h)."""
    return float(np.polyfit(np.log(np.asarray(hs)), np.log(np.asarray(errors)), 1)[0])


def attention_numpy(
    x, w=None, *, beta, Q=None, K=None, V=None, normalization="softmax", causal=False, bias=None
):
    """The one NumPy attention reference (float64): Σ_j a_ij V x_j, unprojected, with
    s_ij = β⟨Q x_i, K x_j⟩ + b_ij over j ≤ i when ``causal``, weights w (None: 1/n) and
    a_ij = w_j e^{s_ij} / Σ_k w_k e^{s_ik} ("softmax", SA) or w_j e^{s_ij} ("n"/"sum", USA)."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    Q, K, V = (np.eye(d) if m is None else np.asarray(m, np.float64) for m in (Q, K, V))
    w = np.full(n, 1.0 / n) if w is None else np.asarray(w, dtype=np.float64)
    s = beta * (x @ Q.T) @ (x @ K.T).T + (0.0 if bias is None else np.asarray(bias))
    if causal:
        s = np.where(np.tril(np.ones((n, n), dtype=bool)), s, -np.inf)
    if normalization == "softmax":
        e = np.exp(s - s.max(axis=1, keepdims=True)) * w[None, :]
        return (e / e.sum(axis=1, keepdims=True)) @ (x @ V.T)
    return (np.exp(s) * w[None, :]) @ (x @ V.T)


def project_numpy(x, v):
    """P^⊥_{x_i} v_i = v_i − ⟨x_i, v_i⟩ x_i for unit rows x_i."""
    return v - np.sum(v * x, axis=1, keepdims=True) * x


def sa_field_numpy(x, beta, Q=None, K=None, V=None, normalization="softmax"):
    """(SA)/(USA) of paper (2.3): the projected :func:`attention_numpy`, uniform weights."""
    x = np.asarray(x, dtype=np.float64)
    return project_numpy(
        x, attention_numpy(x, beta=beta, Q=Q, K=K, V=V, normalization=normalization)
    )
