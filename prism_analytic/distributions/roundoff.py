"""Rigorous bounds on the floating-point error of convolutions (no package imports)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["UNIT_ROUNDOFF", "fft_l1_error", "fft_l2_error"]

#: Unit round-off of float64.
UNIT_ROUNDOFF = np.finfo(float).eps / 2
_U = UNIT_ROUNDOFF


def fft_l1_error(a: np.ndarray, b: np.ndarray) -> float:
    """A bound on the L1 norm of the round-off error of ``fftconvolve(a, b)``.

    Forward and inverse FFTs of length N have relative 2-norm error at most
    ``log2(N) eta / (1 - log2(N) eta)`` with ``eta = mu + gamma_4 (sqrt(2) + mu)`` (Higham
    Thm 24.2; ``mu`` the twiddle-factor error, taken as ``4 u``). Propagating that through the
    product of the transforms gives a 2-norm error below
    ``3 e (||a||_2 ||b||_1 + ||a||_1 ||b||_2) + e ||a||_1 ||b||_2`` with ``e`` the FFT bound;
    the L1 norm is at most ``sqrt(N)`` times that. A factor 2 of margin covers the remaining
    elementwise products.
    """
    n_out = a.size + b.size - 1
    if min(a.size, b.size) <= 64:  # direct summation of non-negative terms: gamma_n relative
        k = min(a.size, b.size)
        return float(k * _U / (1 - k * _U) * np.abs(a).sum() * np.abs(b).sum())
    n_fft = 1 << (n_out - 1).bit_length()
    return math.sqrt(n_fft) * fft_l2_error(a, b)


def fft_l2_error(a: np.ndarray, b: np.ndarray) -> float:
    """A bound on the 2-norm (hence on every entry) of the round-off error of ``fftconvolve``.

    The bound of :func:`fft_l1_error` before its ``sqrt(N)`` factor (same margin of 2).
    """
    n_out = a.size + b.size - 1
    n_fft = 1 << (n_out - 1).bit_length()
    mu = 4 * _U
    gamma4 = 4 * _U / (1 - 4 * _U)
    eta = mu + gamma4 * (math.sqrt(2) + mu)
    lg = math.log2(n_fft)
    e = lg * eta / (1 - lg * eta)
    a1, b1 = float(np.abs(a).sum()), float(np.abs(b).sum())
    a2, b2 = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    l2 = 4 * e * (a2 * b1 + a1 * b2) + _U * a1 * b1
    return 2.0 * l2
