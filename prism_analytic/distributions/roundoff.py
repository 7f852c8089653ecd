"""FFT convolution on power-of-two lengths, with a rigorous bound on its floating-point error.

The bound is Higham's for the radix-2 Cooley-Tukey FFT (*Accuracy and Stability of Numerical
Algorithms*, 2nd ed., 2002, Thm 24.2): relative 2-norm error ``log2(N) eta / (1 - log2(N) eta)``
over ``log2(N)`` butterfly levels. It is proven for ``N = 2^k`` only, so :func:`fft_convolve`
always transforms on a power of two. ``scipy.signal.fftconvolve`` picks
``scipy.fft.next_fast_len`` sizes instead (5-smooth for real data, 11-smooth for complex, e.g.
405,000 = 2^3 3^4 5^4), whose radix-3/5/7/11 passes the theorem does not cover.

What the bound still assumes: pocketfft (scipy.fft) computes a power-of-two length with radix-4
and radix-2 passes. A radix-4 pass does one twiddle product per element and two levels of
additions whose inner factors (+-1, +-i) are exact: at most the error of the two radix-2 levels
it replaces, so the ``log2(N)``-level count stands (the factor-2 margin of
:func:`fft_l2_error` is kept on top). No package imports.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import fft as sp_fft

__all__ = ["UNIT_ROUNDOFF", "fft_convolve", "fft_l1_error", "fft_l2_error", "fft_length"]

#: Unit round-off of float64.
UNIT_ROUNDOFF = np.finfo(float).eps / 2
_U = UNIT_ROUNDOFF

#: Up to this operand length convolutions are summed directly (no FFT).
DIRECT_MAX = 64


def fft_length(n_out: int) -> int:
    """The transform length used for an output of ``n_out`` points: the next power of two."""
    return 1 << (int(n_out) - 1).bit_length()


def fft_convolve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full linear convolution of ``a`` and ``b``, with the error :func:`fft_l1_error` bounds.

    Operands of at most :data:`DIRECT_MAX` points are summed directly; otherwise real FFTs of
    power-of-two length :func:`fft_length` (the case the bound is proven for).
    """
    same = a is b  # a square (repeated squaring): one forward transform serves both
    a = np.asarray(a, dtype=float)
    b = a if same else np.asarray(b, dtype=float)
    if min(a.size, b.size) <= DIRECT_MAX:
        return np.convolve(a, b)
    n_out = a.size + b.size - 1
    n_fft = fft_length(n_out)
    fa = sp_fft.rfft(a, n_fft)
    fb = fa if same else sp_fft.rfft(b, n_fft)
    return sp_fft.irfft(fa * fb, n_fft)[:n_out]


def fft_l1_error(a: np.ndarray, b: np.ndarray) -> float:
    """A bound on the L1 norm of the round-off error of :func:`fft_convolve(a, b) <fft_convolve>`.

    Forward and inverse FFTs of length N have relative 2-norm error at most
    ``log2(N) eta / (1 - log2(N) eta)`` with ``eta = mu + gamma_4 (sqrt(2) + mu)`` (Higham
    Thm 24.2; ``mu`` the twiddle-factor error, taken as ``4 u``). Propagating that through the
    product of the transforms gives a 2-norm error below
    ``3 e (||a||_2 ||b||_1 + ||a||_1 ||b||_2) + e ||a||_1 ||b||_2`` with ``e`` the FFT bound;
    the L1 norm is at most ``sqrt(N)`` times that. A factor 2 of margin covers the remaining
    elementwise products.
    """
    n_out = a.size + b.size - 1
    if min(a.size, b.size) <= DIRECT_MAX:  # direct sum of non-negative terms: gamma_n relative
        k = min(a.size, b.size)
        return float(k * _U / (1 - k * _U) * np.abs(a).sum() * np.abs(b).sum())
    return math.sqrt(fft_length(n_out)) * fft_l2_error(a, b)


def fft_l2_error(a: np.ndarray, b: np.ndarray) -> float:
    """A bound on the 2-norm (hence on every entry) of the round-off error of :func:`fft_convolve`.

    The bound of :func:`fft_l1_error` before its ``sqrt(N)`` factor (same margin of 2).
    """
    n_fft = fft_length(a.size + b.size - 1)
    mu = 4 * _U
    gamma4 = 4 * _U / (1 - 4 * _U)
    eta = mu + gamma4 * (math.sqrt(2) + mu)
    lg = math.log2(n_fft)
    e = lg * eta / (1 - lg * eta)
    a1, b1 = float(np.abs(a).sum()), float(np.abs(b).sum())
    # plain sums, not BLAS: within the factor-2 margin, and far faster on a shared machine
    a2, b2 = math.sqrt(float(np.einsum("i,i", a, a))), math.sqrt(float(np.einsum("i,i", b, b)))
    l2 = 4 * e * (a2 * b1 + a1 * b2) + _U * a1 * b1
    return 2.0 * l2
