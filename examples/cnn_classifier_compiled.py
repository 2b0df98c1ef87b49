"""The CNN of examples/cnn_classifier.py, written as a NumPy/JAX user writes it:
a pure function of a dict of parameter arrays, differentiated and compiled by
`tg.value_and_grad`, with the Adam update written in NumPy.

Same architecture (Conv2d 1->8, ReLU, MaxPool 2, Conv2d 8->16, ReLU, MaxPool 2,
Linear 64->32, ReLU, Linear 32->3), same synthetic images (make_images from the eager
script), same initial weights (those of the eager SmallCNN after torch.manual_seed),
same batch size and Adam settings. The script trains it, prints the loss per epoch and
the held-out accuracy, then times training steps of the same model three ways on the
same batches: tracegrad compiled, tracegrad eager (the eager script's SmallCNN + Adam),
and real PyTorch when it is installed, and checks that compiled and eager give the same
losses step by step.

Run:  python examples/cnn_classifier_compiled.py [--quick] [--epochs N] [--seed S]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cnn_classifier as eager_script

import tracegrad as tg

Params = dict  # name -> ndarray, named as in SmallCNN's state_dict


def forward(p: Params, images):
    """Logits (N, 3) of images (N, 1, 8, 8); Linear weights are (out, in), as in PyTorch."""
    h = tg.max_pool2d(
        tg.relu(tg.conv2d(images, p["features.0.weight"], p["features.0.bias"], padding=1)), 2
    )  # 8x8 -> 4x4
    h = tg.max_pool2d(
        tg.relu(tg.conv2d(h, p["features.3.weight"], p["features.3.bias"], padding=1)), 2
    )  # 4x4 -> 2x2
    h = tg.reshape(h, (np.shape(images)[0], -1))  # Flatten
    h = tg.relu(h @ tg.transpose(p["classifier.1.weight"]) + p["classifier.1.bias"])
    return h @ tg.transpose(p["classifier.3.weight"]) + p["classifier.3.bias"]


def loss_fn(p: Params, images, labels):
    return tg.cross_entropy(forward(p, images), labels)


class Adam:
    """torch.optim.Adam's update (defaults betas=(0.9, 0.999), eps=1e-8), in NumPy."""

    def __init__(self, params: Params, lr: float, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, grads: Params) -> None:
        self.t += 1
        b1, b2 = self.betas
        for k, p in self.params.items():
            g, m, v = grads[k], self.m[k], self.v[k]
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            denom = np.sqrt(v / (1 - b2**self.t)) + self.eps
            p -= (self.lr / (1 - b1**self.t)) * m / denom  # in place: the caller's arrays


def initial_params(seed: int) -> Params:
    """The eager SmallCNN's initial weights for this seed (PyTorch's default init)."""
    eager_script.torch.manual_seed(seed)
    model = eager_script.SmallCNN(len(eager_script.CLASSES))
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def batches(n: int, batch_size: int, rng: np.random.Generator):
    order = rng.permutation(n)
    for start in range(0, n, batch_size):
        yield order[start : start + batch_size]


def accuracy(p: Params, images, labels) -> float:
    """On plain arrays the same ops run as NumPy: no kernel is compiled for evaluation."""
    return float(np.mean(np.argmax(forward(p, images), axis=1) == labels))


def train(
    epochs: int, n_train: int, n_test: int, seed: int, batch_size: int = 32, lr: float = 1e-2
) -> Params:
    x_train, y_train = eager_script.make_images(n_train, seed)
    x_test, y_test = eager_script.make_images(n_test, seed + 1)
    params = initial_params(seed)
    optimizer = Adam(params, lr)
    step = tg.value_and_grad(loss_fn)
    rng = np.random.default_rng(seed)
    print(
        f"{sum(v.size for v in params.values())} parameters; {n_train} training images, "
        f"{n_test} held out; batch {batch_size}"
    )
    first_step, times = None, []
    for epoch in range(1, epochs + 1):
        running, seen = 0.0, 0
        for idx in batches(n_train, batch_size, rng):
            start, cpu = time.perf_counter(), time.process_time()
            loss, grads = step(params, x_train[idx], y_train[idx])
            optimizer.step(grads)
            elapsed = time.perf_counter() - start
            if first_step is None:
                first_step = (elapsed, time.process_time() - cpu)
            else:
                times.append(elapsed)
            running += float(loss) * len(idx)
            seen += len(idx)
        print(
            f"epoch {epoch:2d}  loss {running / seen:.4f}  "
            f"held-out accuracy {accuracy(params, x_test, y_test):.3f}"
        )
    print(
        f"first step (trace + compile): {first_step[0]:.2f} s "
        f"({first_step[1]:.2f} s of CPU); then "
        f"{1000 * statistics.median(times):.2f} ms/step (median of {len(times)})"
    )
    print(f"final held-out accuracy: {accuracy(params, x_test, y_test):.3f}")
    return params


# ----------------------------------------------------------- the three ways, timed


def compiled_steps(params: Params, data, lr: float):
    params = {k: v.copy() for k, v in params.items()}
    optimizer, step = Adam(params, lr), tg.value_and_grad(loss_fn)
    losses, times = [], []
    for images, labels in data:
        start = time.perf_counter()
        loss, grads = step(params, images, labels)
        optimizer.step(grads)
        times.append(time.perf_counter() - start)
        losses.append(float(loss))
    return losses, times


def module_steps(torch, model, data, lr: float):
    """The eager script's training step (zero_grad, loss, backward, Adam) on `model`."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    criterion = torch.nn.CrossEntropyLoss()
    losses, times = [], []
    for images, labels in data:
        images, labels = torch.tensor(images), torch.tensor(labels)
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
        losses.append(loss.item())
    return losses, times


def torch_model(torch, params: Params):
    """The same architecture in real PyTorch, with the same weights."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        ),
        nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 3)),
    )
    names = {"features": "0", "classifier": "1"}
    model.load_state_dict(
        {names[k.split(".")[0]] + k[k.index(".") :]: torch.tensor(v) for k, v in params.items()}
    )
    return model


def compare(
    seed: int, steps: int, torch_threads: int, batch_size: int = 32, lr: float = 1e-2
) -> None:
    x, y = eager_script.make_images(steps * batch_size, seed + 2)
    data = [(x[i : i + batch_size], y[i : i + batch_size]) for i in range(0, len(x), batch_size)]
    params = initial_params(seed)
    rows = []
    compiled_losses, times = compiled_steps(params, data, lr)
    rows.append(("tracegrad compiled", times))
    model = eager_script.SmallCNN(len(eager_script.CLASSES))
    model.load_state_dict({k: eager_script.torch.tensor(v) for k, v in params.items()})
    eager_losses, times = module_steps(eager_script.torch, model, data, lr)
    rows.append(("tracegrad eager", times))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(torch_threads)
        torch_losses, times = module_steps(torch, torch_model(torch, params), data, lr)
        rows.append((f"PyTorch {torch.__version__} eager ({torch_threads} thr)", times))
    print(
        f"\ntime per training step, batch {batch_size} (forward + backward + Adam), "
        f"{steps} steps from the same weights on the same batches:"
    )
    for name, times in rows:
        print(
            f"  {name:34s} {1000 * statistics.median(times[1:]):7.2f} ms   "
            f"(first step {1000 * times[0]:.0f} ms)"
        )
    diff = max(abs(a - b) for a, b in zip(compiled_losses, eager_losses, strict=True))
    print(f"max |compiled - eager| loss over the steps: {diff:.2e}")
    if torch is not None:
        diff = max(abs(a - b) for a, b in zip(compiled_losses, torch_losses, strict=True))
        print(f"max |compiled - PyTorch| loss over the steps: {diff:.2e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds: smaller run")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--compare-steps",
        type=int,
        default=None,
        help="steps timed per implementation (default 20, quick 8)",
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="PyTorch's intra-op threads (default 1: for a model this small, "
        "more threads on a busy 2-core machine made PyTorch ~10x slower)",
    )
    args = parser.parse_args()
    epochs = args.epochs or (4 if args.quick else 10)
    n_train = 768 if args.quick else 3000
    train(epochs, n_train, n_test=600, seed=args.seed)
    compare(args.seed, args.compare_steps or (8 if args.quick else 20), args.torch_threads)


if __name__ == "__main__":
    main()
