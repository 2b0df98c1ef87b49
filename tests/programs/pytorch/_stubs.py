"""Stand-ins for the optional packages the vendored programs import at the top but the
tested parts never use: torchvision (mnist's main() downloads MNIST with it) and
tensorboard (makemore's training loop logs with it). Using one raises."""


class _Unavailable:
    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        raise RuntimeError(f"{self._name}.{attr}: not available in tests/programs (a stub)")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name}: not available in tests/programs (a stub)")


datasets = _Unavailable("torchvision.datasets")
transforms = _Unavailable("torchvision.transforms")
SummaryWriter = _Unavailable("torch.utils.tensorboard.SummaryWriter")
