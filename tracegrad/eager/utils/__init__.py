"""`tracegrad.eager.utils.checkpoint`, at PyTorch's path (torch.utils.checkpoint)."""
import importlib as _importlib

checkpoint = _importlib.import_module("tracegrad.eager.utils.checkpoint")
