"""Independent reference computations shared by tests (never calls attnflow's maths)."""

import numpy as np


def loglog_slope(hs, errors):
    """Least-squares slope of log(error) against log(h)."""
    return float(np.polyfit(np.log(np.asarray(hs)), np.log(np.asarray(errors)), 1)[0])


def sa_field_numpy(x, beta, Q=None, K=None, V=None, normalization="softmax"):
    """(SA)/(USA) of paper (2.3) written directly in NumPy, float64."""
    x = np.asarray(x, dtype=np.float64)
    n, d = x.shape
    Q = np.eye(d) if Q is None else np.asarray(Q)
    K = np.eye(d) if K is None else np.asarray(K)
    V = np.eye(d) if V is None else np.asarray(V)
    logits = beta * (x @ Q.T) @ (x @ K.T).T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    if normalization == "softmax":
        a = e / e.sum(axis=1, keepdims=True)
    else:
        a = np.exp(logits) / n
    out = a @ (x @ V.T)
    return out - np.sum(out * x, axis=1, keepdims=True) * x
