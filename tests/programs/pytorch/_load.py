"""Load a vendored program of this folder under tracegrad.eager (as vendored) or under
real PyTorch (its import lines turned back: `tracegrad.eager` -> `torch`)."""

import pathlib
import re
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent
_IMPORT = re.compile(r"^(\s*)(import|from) tracegrad\.eager\b")
_COUNT = [0]


def source(name: str, backend: str) -> str:
    """The program's text; for backend "torch", its tracegrad.eager imports made torch's."""
    text = (HERE / f"{name}.py").read_text()
    if backend == "tracegrad":
        return text
    assert backend == "torch", backend
    return "\n".join(_IMPORT.sub(r"\1\2 torch", line) for line in text.split("\n"))


def load_program(name: str, backend: str) -> types.ModuleType:
    """A fresh module running tests/programs/pytorch/<name>.py with `backend`'s torch."""
    _COUNT[0] += 1
    mod = types.ModuleType(f"_program_{name}_{backend}_{_COUNT[0]}")
    mod.__file__ = str(HERE / f"{name}.py")
    sys.modules[mod.__name__] = mod  # (dataclasses look the module up)
    exec(compile(source(name, backend), mod.__file__, "exec"), mod.__dict__)
    return mod


def load_pair(name: str) -> dict:
    """{"tracegrad": module, "torch": module}; skips the test when torch is missing."""
    import pytest

    pytest.importorskip("torch")
    return {b: load_program(name, b) for b in ("tracegrad", "torch")}


def same_weights(models: dict) -> None:
    """Copy the torch model's state_dict into the tracegrad one (both have the same keys
    and shapes: checked), so the two runs start from the same weights."""
    import numpy as np

    import tracegrad.eager as tg

    theirs = models["torch"].state_dict()
    ours = models["tracegrad"].state_dict()
    assert list(ours) == list(theirs)
    for k, v in theirs.items():
        assert tuple(ours[k].shape) == tuple(v.shape), k
    models["tracegrad"].load_state_dict(
        {k: tg.tensor(v.detach().numpy()) for k, v in theirs.items()}
    )
    for k, v in models["tracegrad"].state_dict().items():
        np.testing.assert_array_equal(v.numpy(), theirs[k].detach().numpy(), err_msg=k)


def to_numpy(x):
    return x.detach().numpy() if hasattr(x, "detach") else x


def assert_close(a, b, rtol=1e-5, atol=1e-6, err_msg=""):
    import numpy as np

    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=rtol, atol=atol, err_msg=err_msg)


def assert_same_grads(models: dict, rtol=1e-4, atol=1e-6) -> None:
    """Every parameter has a gradient in both libraries, and they agree."""
    ours = dict(models["tracegrad"].named_parameters())
    theirs = dict(models["torch"].named_parameters())
    assert list(ours) == list(theirs)
    for k, p in theirs.items():
        if p.grad is None:
            assert ours[k].grad is None, k
            continue
        assert ours[k].grad is not None, k
        assert_close(ours[k].grad, p.grad, rtol=rtol, atol=atol, err_msg=f"grad of {k}")


def assert_same_params(models: dict, rtol=1e-4) -> None:
    """Parameters after optimizer steps agree to 1e-5 (an attention's c_attn.bias to 1e-3:
    its key part has an exact gradient of 0, so Adam normalizes each library's rounding
    noise there; tests/examples/test_model_examples.param_atol)."""
    from tests.examples.test_model_examples import param_atol

    ours = dict(models["tracegrad"].named_parameters())
    for k, p in models["torch"].named_parameters():
        assert_close(ours[k], p, rtol=rtol, atol=param_atol(k), err_msg=k)
