"""`torch.utils.data`: Dataset, TensorDataset, Subset, random_split, samplers, DataLoader.

Batches come out as PyTorch's default_collate makes them (a TensorDataset gives a list
`[x_batch, y_batch]`). Shuffling draws a seed from the generator that `torch.manual_seed`
seeds (or uses the `generator=` passed in), so a seeded run repeats its order; the order
is not PyTorch's for the same seed (tracegrad's random numbers are NumPy's). Loading
runs in this process: `num_workers`, `pin_memory` and friends are accepted and ignored.

    >>> import tracegrad.eager as torch
    >>> from tracegrad.eager.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(torch.arange(10.0).reshape(5, 2), torch.arange(5))
    >>> [y.tolist() for _, y in DataLoader(ds, batch_size=2)]
    [[0, 1], [2, 3], [4]]
    >>> len(DataLoader(ds, batch_size=2, drop_last=True))
    2
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from tracegrad.eager._tensor import Tensor

__all__ = [
    "Dataset",
    "IterableDataset",
    "TensorDataset",
    "Subset",
    "ConcatDataset",
    "random_split",
    "Sampler",
    "SequentialSampler",
    "RandomSampler",
    "BatchSampler",
    "SubsetRandomSampler",
    "DataLoader",
    "default_collate",
    "get_worker_info",
]


def _numpy_rng(generator) -> np.random.Generator:
    """A NumPy generator for one shuffle: from `generator` (a torch.Generator or a NumPy
    Generator), else seeded by a draw from the global generator, as PyTorch's samplers
    seed themselves from the global RNG."""
    if generator is not None:
        return getattr(generator, "_np", generator)
    from tracegrad.eager.creation import generator as global_generator

    return np.random.default_rng(int(global_generator().integers(0, 2**63 - 1)))


class Dataset:
    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    def __iter__(self):
        raise NotImplementedError


class TensorDataset(Dataset):
    """Sample i is (t[i] for t in tensors); all tensors share their first dimension."""

    def __init__(self, *tensors: Tensor):
        if any(tensors[0].shape[0] != t.shape[0] for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __getitems__(self, indices: list) -> list:
        """A whole batch at once, already collated (one gather per tensor instead of one
        getitem per sample and a stack; same values). Tensors that require grad take the
        per-sample path, so the batch keeps PyTorch's graph (StackBackward0)."""
        if any(t.requires_grad for t in self.tensors):
            return [self[i] for i in indices]
        idx = np.asarray(indices, dtype=np.int64)
        return _Collated([Tensor._wrap(t._data[idx]) for t in self.tensors])

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class _Collated(list):
    """A batch __getitems__ has already collated."""


class Subset(Dataset):
    def __init__(self, dataset: Dataset, indices: Sequence[int]):
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list) -> list:
        inner = [self.indices[i] for i in indices]
        if hasattr(self.dataset, "__getitems__"):
            return self.dataset.__getitems__(inner)
        return [self.dataset[i] for i in inner]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    def __init__(self, datasets):
        self.datasets = list(datasets)
        if not self.datasets:
            raise AssertionError("datasets should not be an empty iterable")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        d = int(np.searchsorted(self.cumulative_sizes, idx, side="right"))
        start = 0 if d == 0 else int(self.cumulative_sizes[d - 1])
        return self.datasets[d][idx - start]


def random_split(dataset: Dataset, lengths: Sequence, generator=None) -> list:
    """Split into non-overlapping Subsets of the given lengths (or fractions summing to 1)."""
    n = len(dataset)
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * frac)) for frac in lengths]
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    perm = _numpy_rng(generator).permutation(n).tolist()
    out, offset = [], 0
    for length in lengths:
        out.append(Subset(dataset, perm[offset : offset + length]))
        offset += length
    return out


class Sampler:
    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    def __init__(self, data_source):
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


class RandomSampler(Sampler):
    def __init__(self, data_source, replacement: bool = False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(
                f"num_samples should be a positive integer value, but got "
                f"num_samples={self.num_samples}"
            )

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        rng = _numpy_rng(self.generator)
        if self.replacement:  # drawn in chunks, as PyTorch's (num_samples may be 1e10)
            return self._with_replacement(rng, n)
        order = []
        for _ in range(self.num_samples // n):
            order.extend(rng.permutation(n).tolist())
        order.extend(rng.permutation(n)[: self.num_samples % n].tolist())
        return iter(order)

    def _with_replacement(self, rng, n: int) -> Iterator[int]:
        left = self.num_samples
        while left > 0:
            chunk = min(left, 32)
            yield from rng.integers(0, n, chunk).tolist()
            left -= chunk

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    def __init__(self, indices, generator=None):
        self.indices = indices
        self.generator = generator

    def __iter__(self):
        rng = _numpy_rng(self.generator)
        return (self.indices[i] for i in rng.permutation(len(self.indices)).tolist())

    def __len__(self) -> int:
        return len(self.indices)


class BatchSampler(Sampler):
    def __init__(self, sampler, batch_size: int, drop_last: bool):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(
                f"batch_size should be a positive integer value, but got batch_size={batch_size}"
            )
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list]:
        batch = []
        for idx in self.sampler:
            batch.append(idx)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


def default_collate(batch: list) -> Any:
    """PyTorch's rules: tensors and arrays are stacked, Python floats become float64 and ints
    int64 tensors, sequences are collated per position (a list), dicts per key."""
    from tracegrad.eager._tensor import tensor
    from tracegrad.eager.torch_ops import stack

    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        return Tensor._wrap(np.stack(batch))
    if isinstance(elem, np.generic):
        return Tensor._wrap(np.asarray(batch))
    if isinstance(elem, bool):
        return tensor(batch)
    if isinstance(elem, float):
        return tensor(batch, dtype=np.float64)
    if isinstance(elem, int):
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, dict):
        return {k: default_collate([d[k] for d in batch]) for k in elem}
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch, strict=True)))
    if isinstance(elem, (list, tuple)):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        return [default_collate(list(s)) for s in zip(*batch, strict=True)]
    raise TypeError(
        "default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
        f"or lists; found {type(elem)}"
    )


def default_convert(data: Any) -> Any:
    if isinstance(data, np.ndarray):
        return Tensor._wrap(data)
    return data


def get_worker_info():
    return None


class DataLoader:
    """Iterate a dataset in batches (torch.utils.data.DataLoader's arguments; see the
    module docstring for what differs)."""

    def __init__(
        self,
        dataset,
        batch_size: int | None = 1,
        shuffle: bool | None = None,
        sampler=None,
        batch_sampler=None,
        num_workers: int = 0,
        collate_fn=None,
        pin_memory: bool = False,
        drop_last: bool = False,
        timeout: float = 0,
        worker_init_fn=None,
        multiprocessing_context=None,
        generator=None,
        *,
        prefetch_factor=None,
        persistent_workers: bool = False,
        pin_memory_device: str = "",
        in_order: bool = True,
    ):
        if num_workers < 0:
            raise ValueError(
                "num_workers option should be non-negative; use num_workers=0 to "
                "disable multiprocessing."
            )
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(
                    f"DataLoader with IterableDataset: expected unspecified shuffle "
                    f"option, but got shuffle={shuffle}"
                )
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError(
                    "batch_sampler option is mutually exclusive with batch_size, "
                    "shuffle, sampler, and drop_last"
                )
            batch_size = None
            drop_last = False
        elif batch_size is None and drop_last:
            raise ValueError(
                "batch_size=None option disables auto-batching and is mutually "
                "exclusive with drop_last"
            )
        if sampler is None and not self._iterable:
            sampler = (
                RandomSampler(dataset, generator=generator)
                if shuffle
                else SequentialSampler(dataset)
            )
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None
        if collate_fn is None:
            collate_fn = (
                default_collate
                if self._auto_collation or (self._iterable and batch_size is not None)
                else default_convert
            )
        self.collate_fn = collate_fn
        self._default_collate = collate_fn is default_collate

    def _fetch(self, indices: list):
        getitems = getattr(self.dataset, "__getitems__", None)
        if getitems is not None:
            data = getitems(indices)
            if isinstance(data, _Collated):
                return (
                    data
                    if self._default_collate
                    else self.collate_fn([self.dataset[i] for i in indices])
                )
        else:
            data = [self.dataset[i] for i in indices]
        return self.collate_fn(data)

    def __iter__(self) -> Iterator:
        if self._iterable:
            if self.batch_size is None:
                for item in self.dataset:
                    yield self.collate_fn(item)
                return
            batch = []
            for item in self.dataset:
                batch.append(item)
                if len(batch) == self.batch_size:
                    yield self.collate_fn(batch)
                    batch = []
            if batch and not self.drop_last:
                yield self.collate_fn(batch)
            return
        if self._auto_collation:
            for indices in self.batch_sampler:
                yield self._fetch(list(indices))
        else:
            for i in self.sampler:
                yield self.collate_fn(self.dataset[i])

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler) if self._auto_collation else len(self.sampler)
