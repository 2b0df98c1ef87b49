"""Run every snippet of the seed document ("Autograd and computational graphs in
PyTorch") with `import tracegrad.eager as torch`, in order, and print each result
beside the document's claim. Where real PyTorch disagrees with the document,
the line is flagged "DOC IS WRONG" and says what PyTorch really does.

    python examples/seed_walkthrough.py            # tracegrad.eager
    python examples/seed_walkthrough.py --torch    # the same snippets on real PyTorch

Each snippet is a function of the `torch` module, so tests/eager/test_seed.py
runs them on both libraries and compares every recorded result.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

Record = list  # of (what, result string, the document's claim, verdict)


def show(obj) -> str:
    """repr without memory addresses (so two runs and two libraries compare)."""
    return re.sub(r" object at 0x[0-9a-f]+", "", repr(obj))


def error_text(fn: Callable) -> str:
    try:
        fn()
    except Exception as exc:  # the snippets that the document says fail
        # PyTorch's text; tracegrad may add a second line naming the op and your line
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return "no error"


# Verdicts: "ok" the document is right; "WRONG" the document is wrong about PyTorch;
# "name" the document abbreviates PyTorch's node name (MulBackward for MulBackward0).
def step1_forward(torch) -> Record:
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    z = x * y + x**2  # z = 3x + x²
    mul, pow_ = [n for n, _ in z.grad_fn.next_functions]
    return [
        ("(x * y).grad_fn", show((x * y).grad_fn), "grad_fn=<MulBackward>", "name"),
        ("(x**2).grad_fn", show((x**2).grad_fn), "grad_fn=<PowBackward>", "name"),
        ("z.grad_fn", show(z.grad_fn), "z.grad_fn = <AddBackward>", "name"),
        (
            "z.grad_fn.next_functions",
            f"({mul.name()}, {pow_.name()})",
            "+ combines MulBackward and PowBackward",
            "ok",
        ),
        ("z", show(z), "z = 3x + x² = 10 at x=2", "ok"),
    ]


def step2_backward(torch) -> Record:
    x = torch.tensor([2.0], requires_grad=True)
    y = torch.tensor([3.0], requires_grad=True)
    z = x * y + x**2
    z.backward()  # Compute dz/dx and dz/dy
    out = [
        (
            "x.grad",
            show(x.grad),
            "tensor([8.]) = 3+ 2*2",
            "WRONG: dz/dx = y + 2x = 3 + 4 = 7; PyTorch prints tensor([7.])",
        ),
        ("y.grad", show(y.grad), "tensor([2.]) = 2", "ok"),
    ]
    x.grad.zero_()  # Clear previous gradients (Step 3)
    out.append(("after x.grad.zero_()", show(x.grad), "gradients cleared", "ok"))
    return out


def example1_linear_relu(torch) -> Record:
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    W = torch.tensor([[0.5, -0.3], [0.2, 0.4]], requires_grad=True)
    b = torch.tensor([[0.1, -0.2]], requires_grad=True)
    z = torch.matmul(x, W) + b  # z = xW + b
    y = torch.relu(z)  # y = max(0, z)
    loss = y.sum()  # Scalar loss
    loss.backward()
    return [
        ("z", show(z.detach()), "z = [1.0, 0.3]", "ok"),
        ("loss", show(loss), "L = 1.3", "ok"),
        (
            "x.grad",
            show(x.grad),
            "dL/dx = (W @ [1, 1])ᵀ = [0.2, 0.6] (printed, value not stated)",
            "ok",
        ),
        ("W.grad", show(W.grad), "[[1, 1], [2, 2]]", "ok"),
        ("b.grad", show(b.grad), "(not printed) [1, 1]", "ok"),
    ]


def example2_retain_graph(torch) -> Record:
    x = torch.tensor([2.0], requires_grad=True)
    y = x**2
    y.backward()  # First backward
    first = show(x.grad)
    second = error_text(lambda: y.backward())
    x.grad.zero_()
    y = x**2
    y.backward(retain_graph=True)
    retained = show(x.grad)
    y.backward()  # Works now!
    return [
        ("x.grad after first backward", first, "tensor([4.])", "ok"),
        (
            "y.backward() again",
            second,
            "RuntimeError: graph has been freed",
            "ok (PyTorch's full text: 'Trying to backward through the graph a second time ...')",
        ),
        ("x.grad with retain_graph=True", retained, "tensor([4.])", "ok"),
        ("x.grad after the second backward", show(x.grad), "tensor([8.]) - accumulated!", "ok"),
    ]


def example3_detach(torch) -> Record:
    x = torch.tensor([3.0], requires_grad=True)
    hidden = x**2  # hidden = 9
    output = hidden.detach() * x  # output = 9 * 3 = 27
    output.backward()
    detached = show(x.grad)
    x2 = torch.tensor([3.0], requires_grad=True)
    (x2**2 * x2).backward()
    return [
        ("output", show(output), "output = 9 * 3 = 27", "ok"),
        ("x.grad (detached)", detached, "tensor([9.])", "ok"),
        (
            "x.grad without detach",
            show(x2.grad),
            "'Why 9, not 15?' ... 3x² = 27",
            "WRONG: the heading's 15 is a typo; without detach d(x³)/dx = 3x² = 27",
        ),
    ]


def _tiny_model(torch):
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -0.25]]))
        model.bias.copy_(torch.tensor([0.1]))
    return model, torch.optim.SGD(model.parameters(), lr=0.0)  # lr 0: gradients stay comparable


def mistake1_zero_grad(torch) -> Record:
    model, optimizer = _tiny_model(torch)
    x = torch.tensor([[1.0, 2.0]])
    grads = []
    for _epoch in range(3):  # Wrong approach: no zero_grad
        loss = model(x).sum()
        loss.backward()
        optimizer.step()  # Gradients keep accumulating!
        grads.append(model.weight.grad.tolist())
    fixed = []
    for _epoch in range(3):  # Fix
        optimizer.zero_grad()  # Clear gradients
        loss = model(x).sum()
        loss.backward()
        optimizer.step()
        fixed.append(model.weight.grad.tolist())
    return [
        ("weight.grad per iteration, no zero_grad", str(grads), "g1, g1+g2, g1+g2+g3", "ok"),
        ("weight.grad per iteration, with zero_grad", str(fixed), "g each time", "ok"),
    ]


def mistake2_non_scalar(torch) -> Record:
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x**2
    wrong = error_text(lambda: y.backward())  # RuntimeError!
    y.sum().backward()  # Option 1: Sum to scalar
    opt1 = show(x.grad)
    x.grad = None
    y = x**2  # (a fresh graph: the first option freed the old one, as in PyTorch)
    y.backward(torch.ones_like(y))  # Option 2: Provide gradient argument
    opt2 = show(x.grad)
    x.grad = None
    y = x**2
    y[0].backward()  # Option 3: Specific element
    opt3 = show(x.grad)
    return [
        ("y.backward() on a vector", wrong, "RuntimeError!", "ok"),
        ("Option 1: y.sum().backward()", opt1, "gradient of the sum", "ok"),
        ("Option 2: y.backward(torch.ones_like(y))", opt2, "Equivalent to sum", "ok"),
        ("Option 3: y[0].backward()", opt3, "Only backprop through first element", "ok"),
    ]


def mistake3_inplace(torch) -> Record:
    x = torch.tensor([2.0], requires_grad=True)
    y = x**2
    y += 1  # In-place operation
    result = error_text(lambda: y.backward())
    pow_grad = show(x.grad)
    x2 = torch.tensor([2.0], requires_grad=True)
    e = x2.exp()
    e += 1
    exp_result = error_text(lambda: e.backward())
    x3 = torch.tensor([2.0], requires_grad=True)
    y3 = x3**2
    y3 = y3 + 1  # Out-of-place (the document writes "y y + 1")
    y3.backward()
    return [
        (
            "y = x**2; y += 1; y.backward()",
            f"{result}; x.grad = {pow_grad}",
            "RuntimeError: modified by inplace operation",
            "WRONG: PowBackward0 saved x, not y, so PyTorch runs it and x.grad = tensor([4.])",
        ),
        (
            "same with y = x.exp() (saves its output)",
            exp_result,
            "(the document's point)",
            "ok: this is the case that really fails",
        ),
        ("the fix y = y + 1", show(x3.grad), "2x = 4", "ok"),
    ]


def grad_fn_chain(torch) -> Record:
    x = torch.tensor([1.0], requires_grad=True)
    y = x * 2
    z = y + 3
    return [
        (
            "print(y.grad_fn)",
            show(y.grad_fn),
            "<MulBackward0>",
            "ok (PyTorch prints '<MulBackward0 object at 0x...>')",
        ),
        ("print(z.grad_fn)", show(z.grad_fn), "<AddBackward0>", "ok"),
        (
            "print(z.grad_fn.next_functions)",
            show(z.grad_fn.next_functions),
            "Shows MulBackward0",
            "ok (the Python scalar 3 shows as (None, 0))",
        ),
        ("x.is_leaf, x.grad_fn", f"{x.is_leaf}, {x.grad_fn}", "True, None", "ok"),
        ("y.is_leaf", str(y.is_leaf), "False", "ok"),
    ]


def no_grad_and_inference(torch) -> Record:
    model, _ = _tiny_model(torch)
    x = torch.tensor([[1.0, 2.0]])
    with torch.no_grad():
        output = model(x)  # No graph built
    later = model(output.expand(1, 2)).sum()  # usable in autograd later
    with torch.inference_mode():
        inf_out = model(x)
    reuse = error_text(lambda: (model(x) * inf_out).sum().backward())
    return [
        (
            "no_grad: output.requires_grad, grad_fn",
            f"{output.requires_grad}, {output.grad_fn}",
            "No graph built",
            "ok",
        ),
        ("no_grad output used later", show(later.grad_fn), "allowed", "ok"),
        ("inference_mode: output", show(inf_out), "no graph", "ok"),
        (
            "inference tensor used in autograd later",
            reuse,
            "cannot be used in gradient computation later",
            "ok",
        ),
    ]


SNIPPETS = [
    step1_forward,
    step2_backward,
    example1_linear_relu,
    example2_retain_graph,
    example3_detach,
    mistake1_zero_grad,
    mistake2_non_scalar,
    mistake3_inplace,
    grad_fn_chain,
    no_grad_and_inference,
]


def main(argv: list[str]) -> int:
    if "--torch" in argv:
        try:
            import torch
        except ImportError:
            print(
                "--torch runs the snippets under real PyTorch, which is not installed here.\n"
                "Install it with:  pip install -e '.[oracle]'   (or: pip install torch)"
            )
            return 2
    else:
        import tracegrad.eager as torch
    print(f"Seed walkthrough with {torch.__name__}\n")
    wrong = 0
    for snippet in SNIPPETS:
        print(f"== {snippet.__name__}")
        for what, result, claim, verdict in snippet(torch):
            flag = (
                "DOC IS WRONG"
                if verdict.startswith("WRONG")
                else ("name" if verdict == "name" else "ok")
            )
            wrong += flag == "DOC IS WRONG"
            print(f"  {what}")
            print(f"      result  : {result}")
            print(f"      document: {claim}")
            if flag == "DOC IS WRONG":
                print(f"      >>> DOC IS WRONG: {verdict[len('WRONG: ') :]}")
            elif flag == "name":
                print("      >>> note: PyTorch's node names end in a number (e.g. MulBackward0)")
            elif verdict != "ok":
                print(f"      >>> {verdict}")
        print()
    print(f"{wrong} places where PyTorch disagrees with the document.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
