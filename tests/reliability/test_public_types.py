"""The public front end is fully annotated (issue 27): every parameter and the return
of each function below has a type hint, so a user's type checker sees the API, not
`Any`, and `tracegrad/py.typed` ships with the package so it is allowed to look.
(mypy checks the annotations' bodies: pyproject.toml [tool.mypy].)"""

import inspect
from pathlib import Path

import pytest

import tracegrad as tg

FRONT_END = [
    "compile",
    "jit",
    "explain",
    "grad",
    "value_and_grad",
    "jacobian",
    "jacrev",
    "hessian",
    "jacfwd",
    "jvp",
    "vjp",
    "linearize",
    "vmap",
    "scan",
    "fori_loop",
    "while_loop",
    "cond",
    "trace",
    "make_jaxpr",
    "eval_shape",
    "gradcheck",
    "clear_caches",
    "set_num_threads",
    "get_num_threads",
]


@pytest.mark.parametrize("name", FRONT_END)
def test_front_end_signature_is_fully_annotated(name):
    sig = inspect.signature(getattr(tg, name))
    missing = [p for p, v in sig.parameters.items() if v.annotation is inspect.Parameter.empty]
    assert not missing, f"tracegrad.{name}: parameters without a type hint: {missing}"
    assert sig.return_annotation is not inspect.Signature.empty, (
        f"tracegrad.{name}: no return type hint"
    )


@pytest.mark.parametrize("name", ["custom_vjp", "custom_jvp"])
def test_custom_rule_constructors_are_annotated(name):
    sig = inspect.signature(getattr(tg, name).__init__)
    missing = [
        p
        for p, v in sig.parameters.items()
        if p != "self" and v.annotation is inspect.Parameter.empty
    ]
    assert not missing, f"tracegrad.{name}: parameters without a type hint: {missing}"


def test_the_package_ships_its_py_typed_marker():
    root = Path(tg.__file__).parent
    assert (root / "py.typed").is_file()
    pyproject = (root.parent / "pyproject.toml").read_text()
    assert 'tracegrad = ["py.typed"]' in pyproject  # package data: it installs too
