"""PyTorch's path for checkpointing: `torch.utils.checkpoint.checkpoint(fn, *args)`."""

from tracegrad.eager.checkpointing import checkpoint, checkpoint_sequential  # noqa: F401
