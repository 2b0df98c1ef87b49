"""NumPy-named public ops (`tracegrad.exp`, `tracegrad.sum(x, axis=..)`, ...)."""
from tracegrad.ops.table import add, sub, mul, div, neg, exp, tanh, reshape, broadcast_to  # noqa: F401
