"""Run by test_cache.py in a fresh process: build a small kernel, check it, report.

Usage: python cache_child.py <cache dir>   (prints "OK <source_path>")
"""

import os
import sys

os.environ["TRACEGRAD_CACHE_DIR"] = sys.argv[1]
os.environ["TRACEGRAD_LOG"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/

import numpy as np
from codegen_helpers import GraphMaker

from tracegrad.codegen import build_kernel


def graph():
    gm = GraphMaker("cache_probe")
    x = gm.input((5,), "float64", "x")
    return gm.output(gm.op("sum", gm.op("mul", gm.op("tanh", x), x), axis=None, keepdims=False))


if __name__ == "__main__":
    kernel = build_kernel(graph())
    x = np.linspace(-1, 1, 5)
    (value,) = kernel(x)
    assert abs(float(value) - float(np.sum(np.tanh(x) * x))) < 1e-12, value
    print("OK", kernel.source_path)
