"""Train a small classifier on two interleaved spirals, eagerly and compiled.

The data set is made by this script (no downloads). The network has two hidden
tanh layers. It is trained twice from the same initial weights on the same data
with the same Adam settings:
  - eager:    tracegrad.eager.nn + optim, a new dynamic graph every step;
  - compiled: one `tracegrad.value_and_grad` step, traced and compiled once,
              with the same Adam update written in NumPy.
Both reach the same accuracy; the script prints both times and, when matplotlib
is installed, saves a PNG of the loss curves and the decision boundary.

Run:  python examples/train_mlp.py [--quick] [--steps N] [--out examples/out]
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys
import time

import numpy as np

import tracegrad as tg
import tracegrad.eager as eager
from tracegrad.eager import nn, optim


# --------------------------------------------------------------------- data
def two_spirals(
    points_per_class: int, noise: float = 0.04, turns: float = 1.75, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Two interleaved spiral arms in [-1, 1]^2, labelled 0 and 1."""
    rng = np.random.default_rng(seed)
    radius = np.sqrt(rng.uniform(0.0, 1.0, points_per_class))  # even density along the arm
    angle = radius * turns * 2 * np.pi
    arms = []
    for label in (0, 1):
        a = angle + label * np.pi
        xy = np.stack([radius * np.cos(a), radius * np.sin(a)], axis=1)
        arms.append(xy + rng.normal(0.0, noise, xy.shape))
    x = np.concatenate(arms).astype(np.float32)
    y = np.repeat(np.arange(2), points_per_class)
    return x, y


# ------------------------------------------------------------------- models
def make_eager_model(hidden: int, seed: int) -> nn.Module:
    eager.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(2, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(), nn.Linear(hidden, 2)
    )


def weights_of(model: nn.Module) -> list[np.ndarray]:
    """The model's parameters as NumPy copies: w1, b1, w2, b2, w3, b3 (PyTorch layout)."""
    return [p.detach().numpy().copy() for p in model.parameters()]


def mlp_loss(w1, b1, w2, b2, w3, b3, x, onehot):
    """Cross-entropy of the same network, in tracegrad ops (weights are (out, in))."""
    logits = mlp_logits(w1, b1, w2, b2, w3, b3, x)
    return -tg.mean(tg.sum(onehot * tg.log_softmax(logits, axis=1), axis=1))


def mlp_logits(w1, b1, w2, b2, w3, b3, x):
    h = tg.tanh(x @ tg.transpose(w1) + b1)
    h = tg.tanh(h @ tg.transpose(w2) + b2)
    return h @ tg.transpose(w3) + b3


class Adam:
    """torch.optim.Adam's update, in NumPy, for the compiled run."""

    def __init__(self, params: list[np.ndarray], lr: float, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr, self.betas, self.eps = params, lr, betas, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads) -> None:
        self.t += 1
        b1, b2 = self.betas
        for p, g, m, v in zip(self.params, grads, self.m, self.v, strict=True):
            m *= b1
            m += (1 - b1) * g
            v *= b2
            v += (1 - b2) * g * g
            m_hat = m / (1 - b1**self.t)
            v_hat = v / (1 - b2**self.t)
            p -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)


# ----------------------------------------------------------------- training
class Progress:
    """A one-line text progress bar (tqdm is used instead when it is installed)."""

    def __init__(self, total: int, label: str):
        self.total, self.label, self.bar = total, label, None
        try:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=label, ncols=80, file=sys.stdout)
        except ImportError:
            self.interactive = sys.stdout.isatty()
            self.shown = -1

    def update(self, step: int, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            return
        tenth = (step + 1) * 10 // self.total
        if not self.interactive and tenth == self.shown:
            return  # in a log file: one line per 10%
        self.shown = tenth
        filled = (step + 1) * 30 // self.total
        line = (
            f"{self.label:<9} [{'#' * filled}{'.' * (30 - filled)}] "
            f"{step + 1:>5}/{self.total}  loss {loss:.4f}"
        )
        print(
            ("\r" + line) if self.interactive else line,
            end="" if self.interactive else "\n",
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.interactive:
            print()


def train_eager(model, x, y, steps: int, lr: float) -> tuple[list[float], list[float]]:
    """Returns the loss and the wall time of every step."""
    optimizer = optim.Adam(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    inputs, targets = eager.tensor(x), eager.tensor(y)
    losses, times, bar = [], [], Progress(steps, "eager")
    for step in range(steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - start)
        bar.update(step, losses[-1])
    bar.close()
    return losses, times


def train_compiled(params: list[np.ndarray], x, y, steps: int, lr: float):
    """The same loop with a compiled value_and_grad step; its first step traces and compiles."""
    onehot = np.eye(2, dtype=np.float32)[y]
    step_fn = tg.value_and_grad(mlp_loss, argnums=tuple(range(len(params))))
    optimizer = Adam(params, lr)
    losses, times, bar = [], [], Progress(steps, "compiled")
    for step in range(steps):
        start = time.perf_counter()
        loss, grads = step_fn(*params, x, onehot)
        optimizer.step(grads)
        losses.append(float(loss))
        times.append(time.perf_counter() - start)
        bar.update(step, losses[-1])
    bar.close()
    return losses, times


def accuracy(logits: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=1) == y))


def eager_logits(model, x: np.ndarray) -> np.ndarray:
    with eager.no_grad():
        return model(eager.tensor(x)).numpy()


# -------------------------------------------------------------------- plot
def save_plot(
    path: pathlib.Path, x, y, eager_losses, compiled_losses, predict, note: str = ""
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (ax_loss, ax_map) = plt.subplots(1, 2, figsize=(11, 4.6))
    ax_loss.semilogy(eager_losses, label="eager (tracegrad.eager.nn + optim.Adam)", lw=2)
    ax_loss.semilogy(compiled_losses, "--", label="compiled (value_and_grad + NumPy Adam)", lw=1.5)
    gap = np.max(np.abs(np.asarray(eager_losses) - np.asarray(compiled_losses)))
    ax_loss.set(
        xlabel="step",
        ylabel="cross-entropy loss (log scale)",
        title=f"Training loss: same init, same data\n"
        f"(the curves overlap: max difference {gap:.1e})",
    )
    ax_loss.legend()
    ax_loss.grid(alpha=0.3, which="both")

    grid = np.linspace(-1.3, 1.3, 300, dtype=np.float32)
    gx, gy = np.meshgrid(grid, grid)
    points = np.stack([gx.ravel(), gy.ravel()], axis=1)
    logits = predict(points)
    p1 = np.exp(logits[:, 1] - np.logaddexp(logits[:, 0], logits[:, 1])).reshape(gx.shape)
    ax_map.contourf(gx, gy, p1, levels=np.linspace(0, 1, 11), cmap="RdBu_r", alpha=0.4)
    ax_map.contour(gx, gy, p1, levels=[0.5], colors="k", linewidths=1.2)
    for label, color in ((0, "#1f4e9c"), (1, "#b2182b")):
        pts = x[y == label]
        ax_map.scatter(
            pts[:, 0],
            pts[:, 1],
            s=9,
            c=color,
            edgecolors="white",
            linewidths=0.3,
            label=f"class {label}",
        )
    ax_map.set(
        title=f"Decision boundary (compiled model)\n{note}",
        aspect="equal",
        xlim=(-1.3, 1.3),
        ylim=(-1.3, 1.3),
    )
    ax_map.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few points and steps (a smoke run)")
    parser.add_argument("--steps", type=int, default=None, help="training steps (default 500)")
    parser.add_argument("--points", type=int, default=None, help="points per spiral (default 300)")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--out", default=str(pathlib.Path(__file__).parent / "out"))
    args = parser.parse_args(argv)
    steps = args.steps or (60 if args.quick else 500)
    points = args.points or (100 if args.quick else 300)

    x, y = two_spirals(points)
    x_test, y_test = two_spirals(points, seed=1)
    print(
        f"two spirals: {len(x)} training points, {len(x_test)} test points; "
        f"network 2 -> {args.hidden} -> {args.hidden} -> 2 (tanh); Adam lr {args.lr}; "
        f"{steps} full-batch steps"
    )

    model = make_eager_model(args.hidden, seed=0)
    params = weights_of(model)  # the compiled run starts from these same weights

    eager_losses, eager_times = train_eager(model, x, y, steps, args.lr)
    compiled_losses, compiled_times = train_compiled(params, x, y, steps, args.lr)

    def compiled_predict(points_):
        return np.asarray(mlp_logits(*params, points_))  # plain NumPy: ops run on arrays too

    rows = [
        ("eager", eager_losses, eager_times, eager_logits(model, x), eager_logits(model, x_test)),
        (
            "compiled",
            compiled_losses,
            compiled_times,
            compiled_predict(x),
            compiled_predict(x_test),
        ),
    ]
    print(
        f"\n{'mode':<10}{'final loss':>12}{'train acc':>11}{'test acc':>10}"
        f"{'total time':>12}{'first step':>12}{'median step':>13}"
    )
    for name, losses, times, train_logits, test_logits in rows:
        print(
            f"{name:<10}{losses[-1]:>12.5f}{accuracy(train_logits, y):>11.1%}"
            f"{accuracy(test_logits, y_test):>10.1%}{sum(times):>11.2f}s"
            f"{times[0] * 1e3:>10.1f}ms{statistics.median(times) * 1e3:>11.2f}ms"
        )
    speedup_total = sum(eager_times) / sum(compiled_times)
    speedup_step = statistics.median(eager_times) / statistics.median(compiled_times)
    print(
        f"compiled's first step traces and compiles ({compiled_times[0]:.2f} s; cached on disk "
        f"for later runs).\nspeedup of compiled over eager: {speedup_step:.1f}x per step "
        f"(median), {speedup_total:.2f}x in total over {steps} steps"
    )
    print(
        f"max |eager - compiled| loss over the run: "
        f"{np.max(np.abs(np.array(eager_losses) - np.array(compiled_losses))):.2e}"
    )

    out_dir = pathlib.Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    png = out_dir / "train_mlp.png"
    note = (
        f"train accuracy {accuracy(compiled_predict(x), y):.1%}, "
        f"test accuracy {accuracy(compiled_predict(x_test), y_test):.1%}"
    )
    if save_plot(png, x, y, eager_losses, compiled_losses, compiled_predict, note):
        print(f"wrote {png}")
    else:
        print("matplotlib is not installed: skipped the PNG (pip install matplotlib)")


if __name__ == "__main__":
    main()
