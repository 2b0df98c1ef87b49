"""The primitives and the NumPy-named API.

core.py       Primitive, bind, value kinds, Aval, errors
rulekit.py    shape/dtype rules shared by many primitives
table.py      THE rule table: one definition per primitive
linalg.py     its linear algebra rows (cholesky, solve, inv, ...), imported by table.py
complex_ops.py, fourier.py, linalg_eig.py
              complex numbers: real/imag/conj/complex, fft, eig and complex solve/det
indexing.py   a NumPy index -> getitem's static spec + index-array operands
api.py        the public NumPy-named functions (re-exported as tracegrad.*)
operators.py  ArrayOperators / ArrayMethods mixins for Tensor and Tracer
"""
