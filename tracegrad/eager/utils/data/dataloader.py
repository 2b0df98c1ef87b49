"""torch.utils.data.dataloader: where PyTorch defines DataLoader (programs import it from here)."""

from tracegrad.eager.utils.data import DataLoader, default_collate, get_worker_info

__all__ = ["DataLoader", "default_collate", "get_worker_info"]
