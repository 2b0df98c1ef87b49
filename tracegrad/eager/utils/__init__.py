"""`tracegrad.eager.utils`, at PyTorch's paths: torch.utils.checkpoint, torch.utils.data."""

import importlib as _importlib

checkpoint = _importlib.import_module("tracegrad.eager.utils.checkpoint")
data = _importlib.import_module("tracegrad.eager.utils.data")
