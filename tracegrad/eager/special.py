"""torch.special: the special functions under PyTorch's names (tracegrad.ops.special's
primitives for gammaln, digamma, polygamma and erfinv; compositions for the rest).

    >>> import tracegrad.eager as torch
    >>> f"{torch.special.gammaln(torch.tensor(5.0)).item():.4f}"  # log 4!
    '3.1781'
"""

from __future__ import annotations

import math

from tracegrad.eager import more_ops as M
from tracegrad.eager import torch_ops as O
from tracegrad.eager._tensor import apply_op

gammaln = M.lgamma
digamma = psi = M.digamma
polygamma = M.polygamma
multigammaln = M.mvlgamma
erf = M.erf
erfc = M.erfc
erfinv = M.erfinv
expm1 = O.expm1
exp2 = M.exp2
log1p = O.log1p
logit = M.logit
xlogy = M.xlogy
sinc = M.sinc
logsumexp = O.logsumexp
round = M.round


def expit(input):
    return O.sigmoid(input)


def softmax(input, dim, *, dtype=None):
    return O.softmax(input, dim, dtype)


def log_softmax(input, dim, *, dtype=None):
    return O.log_softmax(input, dim, dtype)


def xlog1py(input, other):
    """x * log1p(y), 0 where x is 0."""
    from tracegrad.eager._tensor import tensor

    x, y = M._t(input), M._t(other)
    zero = tensor(x._data == 0)
    out = x * O.log1p(O.where(zero, M._const(M._float(y), 0.0), y))
    return O.where(zero, M._const(out, 0.0), out)


def entr(input):
    """-x log x for x > 0, 0 at 0, -inf for x < 0."""
    x = M._float(M._t(input))
    pos = M.tensor(x._data > 0)
    safe = O.where(pos, x, M._const(x, 1.0))
    out = O.where(pos, -safe * O.log(safe), M._const(x, 0.0))
    return O.where(M.tensor(x._data < 0), M._const(x, -math.inf), out)


def ndtr(input):
    """The standard normal cdf."""
    return (1.0 + M.erf(M._float(M._t(input)) * (1 / math.sqrt(2.0)))) * 0.5


def ndtri(input):
    from tracegrad.ops import special as S

    return apply_op(S.ndtri, (M._float(M._t(input)),), {})


def log_ndtr(input):
    from tracegrad.ops import special as S

    return apply_op(S.log_ndtr, (M._float(M._t(input)),), {})


def i0(input):
    raise NotImplementedError("torch.special.i0 is not supported by tracegrad.eager")
