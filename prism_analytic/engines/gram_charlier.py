"""Clark's max of two inputs whose difference is not normal: Gram-Charlier corrections.

One formula shared by the cores that correct each max for a skewed or leptokurtic difference
of its inputs: the skew core (:mod:`.skew_core`, the skewness the ops' third cumulants give
``D``) and the kurtosis core (:mod:`.kurtosis_core`, which adds ``D``'s excess kurtosis).
Checked against quadrature in ``tests/engines/test_kurtosis_core.py``.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gram_charlier_max"]

_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def gram_charlier_max(
    dmu: np.ndarray,
    theta: np.ndarray,
    t: np.ndarray,
    thph: np.ndarray,
    cab: np.ndarray,
    vb: np.ndarray,
    g2: np.ndarray | float,
    g1: np.ndarray | float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Corrections ``(d_mean, d_var)`` of Clark's max for a non-Gaussian difference of the inputs.

    ``max(A, B) = B + D+`` with ``D = A - B`` of mean ``dmu`` and sd ``theta``; the density of
    ``D``'s standardised form is ``phi(z) (1 + g1 He3(z) / 6 + g2 He4(z) / 24)`` (Gram-Charlier).
    The partial moments follow by parts (``He_n phi = (-1)^n phi^(n)``), the covariance of ``B``
    with ``D+`` from ``B = beta D + e``, ``beta = Cov(B, D) / theta^2``, ``e`` independent of
    ``D``. The skew core passes ``g2 = 0`` and, with skewed ops, D's skewness from the recent
    ops' third cumulants (:meth:`~.skew_core._FullEngine._op_skew_max`); the kurtosis core
    passes its He2-chaos ``g2`` as well.

    Parameters
    ----------
    dmu, theta : numpy.ndarray
        Mean and sd of ``D`` (theta > 0).
    t, thph : numpy.ndarray
        Clark's ``Phi(alpha)`` and ``theta phi(alpha)``.
    cab, vb : numpy.ndarray
        ``Cov(A, B)`` and ``Var B``.
    g2 : numpy.ndarray or float
        Excess kurtosis of ``D``.
    g1 : numpy.ndarray or float
        Skewness of ``D`` (default 0).

    Returns
    -------
    tuple of numpy.ndarray
        Additive corrections to Clark's mean and variance (both 0 where ``g1 = g2 = 0``).

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros(1)
    >>> d_mean, _ = gram_charlier_max(z, np.ones(1), z + 0.5, z + 0.3989422804, z, np.ones(1),
    ...                               np.ones(1))
    >>> round(float(d_mean[0]), 6)  # -phi(0) / 24
    -0.016623
    """
    al = dmu / theta
    ph = _INV_SQRT_2PI * np.exp(-0.5 * al * al)
    d1 = theta * ph * (g2 * (al * al - 1.0) / 24.0 - g1 * al / 6.0)  # E[D+]
    d2 = theta * theta * ph * (g1 / 3.0 - g2 * al / 12.0)  # E[(D+)^2]
    e1 = dmu * t + thph  # Clark's E[D+]
    beta = (cab - vb) / (theta * theta)
    d_var_dplus = d2 - 2.0 * e1 * d1 - d1 * d1
    d_cov = d2 - dmu * d1  # Cov(D, D+)
    return d1, d_var_dplus + 2.0 * beta * d_cov
