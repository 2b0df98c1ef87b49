"""A small convolutional classifier, written as a PyTorch user writes one.

The code below the imports is plain PyTorch (Conv2d, MaxPool2d, Flatten, Linear,
CrossEntropyLoss, Adam, DataLoader over a TensorDataset, torch.device, torch.save /
torch.load); only the imports name tracegrad, and `--torch` runs the same file under
PyTorch. The initial weights are drawn with NumPy (examples/_common.py), so both
libraries start from the same ones; tests/examples/test_model_examples.py compares 20
training steps of `train_step` under both.

The data set is made here: 8x8 grey images of a horizontal bar, a vertical bar or a
cross, at random positions, with noise (three classes). The script prints the loss per
epoch, the held-out accuracy, and checks that a saved and reloaded model predicts the same.

Run:  python examples/cnn_classifier.py [--quick] [--epochs N] [--seed S] [--torch] [--compile]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
from _common import compiled, default_init, load_weights, numpy_weights, use_torch

if use_torch():
    import torch
    from torch import nn, optim
    from torch.utils.data import DataLoader, TensorDataset
else:
    import tracegrad.eager as torch
    from tracegrad.eager import nn, optim
    from tracegrad.eager.utils.data import DataLoader, TensorDataset

CLASSES = ("horizontal bar", "vertical bar", "cross")


def make_images(n: int, seed: int, size: int = 8, noise: float = 0.3):
    """n images (n, 1, size, size) float32 and labels (n,) int64, classes balanced."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % len(CLASSES)
    rng.shuffle(labels)
    images = rng.normal(0.0, noise, (n, 1, size, size)).astype(np.float32)
    for img, label in zip(images, labels, strict=True):
        r, c = rng.integers(1, size - 1, 2)  # where the bars cross
        length = rng.integers(4, size + 1)
        r0 = rng.integers(0, size - length + 1)
        c0 = rng.integers(0, size - length + 1)
        if label in (0, 2):
            img[0, r, c0 : c0 + length] += 1.0
        if label in (1, 2):
            img[0, r0 : r0 + length, c] += 1.0
    return images, labels.astype(np.int64)


class SmallCNN(nn.Module):
    def __init__(self, num_classes: int = 3):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
            nn.Conv2d(8, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 4x4 -> 2x2
        )
        self.classifier = nn.Sequential(
            nn.Flatten(),
            nn.Linear(16 * 2 * 2, 32),
            nn.ReLU(),
            nn.Linear(32, num_classes),
        )

    def forward(self, x):
        return self.classifier(self.features(x))


def build(seed: int = 0, lr: float = 1e-2):
    """The model (NumPy initial weights from `seed`, `default_init`'s scheme) and its Adam."""
    model = SmallCNN(len(CLASSES))
    load_weights(torch, model, numpy_weights(model, seed, default_init))
    return model, optim.Adam(model.parameters(), lr=lr)


def make_train_step(model, optimizer):
    criterion = nn.CrossEntropyLoss()

    def train_step(images, labels):
        optimizer.zero_grad(set_to_none=True)
        loss = criterion(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    return train_step


def batches(steps: int, seed: int = 0, batch_size: int = 16) -> list:
    """`steps` fixed batches (images, labels) cycling through 64 images."""
    x, y = make_images(64, seed)
    starts = [(step * batch_size) % 64 for step in range(steps)]
    return [(x[s : s + batch_size], y[s : s + batch_size]) for s in starts]


def accuracy(model, loader, device) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for images, labels in loader:
            images, labels = images.to(device), labels.to(device)
            predicted = model(images).argmax(dim=1)
            correct += (predicted == labels).sum().item()
            total += labels.shape[0]
    model.train()
    return correct / total


def train(
    epochs: int,
    n_train: int,
    n_test: int,
    seed: int,
    batch_size: int = 32,
    lr: float = 1e-2,
    compile: bool = False,
) -> None:
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    x_train, y_train = make_images(n_train, seed)
    x_test, y_test = make_images(n_test, seed + 1)
    train_loader = DataLoader(
        TensorDataset(torch.tensor(x_train), torch.tensor(y_train)),
        batch_size=batch_size,
        shuffle=True,
    )
    test_loader = DataLoader(
        TensorDataset(torch.tensor(x_test), torch.tensor(y_test)), batch_size=256
    )

    model, optimizer = build(seed, lr)
    model.to(device)
    train_step = compiled(torch, make_train_step(model, optimizer), compile)
    n_params = sum(p.numel() for p in model.parameters())
    print(
        f"device: {device}; {n_params} parameters; {n_train} training images, "
        f"{n_test} held out; batch {batch_size}"
    )
    print(model)

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        running, seen = 0.0, 0
        for images, labels in train_loader:
            images, labels = images.to(device), labels.to(device)
            loss = train_step(images, labels)
            running += loss.item() * labels.shape[0]
            seen += labels.shape[0]
        print(
            f"epoch {epoch:2d}  loss {running / seen:.4f}  "
            f"held-out accuracy {accuracy(model, test_loader, device):.3f}"
        )
    elapsed = time.perf_counter() - start
    steps = epochs * len(train_loader)
    print(f"trained {steps} steps in {elapsed:.2f} s ({1000 * elapsed / steps:.1f} ms/step)")

    final = accuracy(model, test_loader, device)
    print(f"final held-out accuracy: {final:.3f}")

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "small_cnn.pt")
        torch.save(model.state_dict(), path)
        reloaded = SmallCNN(len(CLASSES))
        reloaded.load_state_dict(torch.load(path, weights_only=True))
        reloaded.to(device)
    print(f"reloaded from torch.save: accuracy {accuracy(reloaded, test_loader, device):.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds: smaller run")
    parser.add_argument("--epochs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torch", action="store_true", help="run under real PyTorch")
    parser.add_argument("--compile", action="store_true", help="wrap train_step with torch.compile")
    args = parser.parse_args()
    epochs = args.epochs or (4 if args.quick else 10)
    n_train = 768 if args.quick else 3000
    train(epochs, n_train, n_test=600, seed=args.seed, compile=args.compile)


if __name__ == "__main__":
    main()
