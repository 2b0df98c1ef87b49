"""Where a kernel's temporaries live: liveness-based offsets in one workspace per dtype.

Every temporary of a generated kernel is a region of one flat workspace array
per dtype (`ws_float32`, ...). The code generator walks the schedule unit by
unit: a unit's results get regions when the unit is emitted (`Workspace.take`),
and a value's region, with every copy made of it, is given back once the last
unit reading it, or any view of it, has run (`Workspace.give_back`; the
lifetimes come from `plan.storage_lifetimes`). Regions are placed best-fit
among the free blocks, which are split to fit and merged with free neighbours,
so a dead value of any size serves later values of any smaller size.
Placing in program order can still strand space behind a long-lived value, so
once a kernel is emitted, `plan_offline` places all of its recorded lifetimes
at once; when that saves enough, the kernel is emitted again with those
offsets (generate.py). `check_disjoint` verifies every kernel's placement.

`MemoryReport` is what `Lowered.memory` shows: the workspace each dtype needs,
the bytes of outputs, the peak of bytes live at once (a lower bound for any
placement), and what one region per temporary would need.

    >>> ws = Workspace("ws_float32", "float32")
    >>> a, b = ws.take(100), ws.take(50)
    >>> ws.give_back(a, 100)
    >>> ws.take(30) == a          # a piece of the dead region, not new space
    True
    >>> ws.size, ws.peak_live     # 112 + 64: regions start on 64-byte boundaries
    (176, 150)

Debugging: TRACEGRAD_POISON_FREED=1 makes generated code fill each float
region with NaN when it dies, so a read after the end of a lifetime shows up
as NaN in the results instead of a plausible wrong number.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

import numpy as np

ALIGN_BYTES = 64  # regions start on a cache line of the workspace


def poison_freed() -> bool:
    """TRACEGRAD_POISON_FREED=1: dead float regions are filled with NaN (debugging)."""
    from tracegrad import config

    return config.poison_freed()


class Workspace:
    """Offsets into one flat array of one dtype, in elements.

    `size` is the array's length (the high-water mark). Free blocks are kept
    sorted by offset and merged with their neighbours, so `take` can choose the
    smallest block that fits (best fit) and split off what it does not use."""

    def __init__(self, name: str, dtype, plan: Placement | None = None):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.align = max(1, ALIGN_BYTES // self.dtype.itemsize)
        self.plan = plan  # offsets decided ahead (plan_offline), in take order
        self.size = plan.size if plan is not None else 0
        self.free_offsets: list[int] = []  # sorted starts of free blocks
        self.free_sizes: dict[int, int] = {}  # start -> length
        self.live = 0  # elements of live values (exact sizes)
        self.peak_live = 0
        self.taken = 0  # elements of every value ever placed

    def _rounded(self, n: int) -> int:
        return -(-n // self.align) * self.align

    def take(self, n: int) -> int:
        """The offset of a new region of `n` elements."""
        self.live += n
        self.taken += n
        self.peak_live = max(self.peak_live, self.live)
        if self.plan is not None:
            return self.plan.next(self.name, n)
        if n == 0:
            return 0
        need = self._rounded(n)
        best = None
        for start in self.free_offsets:
            length = self.free_sizes[start]
            if length >= need and (best is None or length < self.free_sizes[best]):
                best = start
                if length == need:
                    break
        if best is None:
            # grow the array; a free block at its end becomes the new region's start
            last = self.free_offsets[-1] if self.free_offsets else None
            if last is not None and last + self.free_sizes[last] == self.size:
                self._remove(last)
                self.size = last + need
                return last
            start = self.size
            self.size += need
            return start
        length = self._remove(best)
        if length > need:
            self._insert(best + need, length - need)
        return best

    def give_back(self, offset: int, n: int) -> None:
        """Region [offset, offset + n) holds no live value any more."""
        self.live -= n
        if n == 0 or self.plan is not None:
            return
        start, length = offset, self._rounded(n)
        i = bisect.bisect_left(self.free_offsets, start)
        if i < len(self.free_offsets) and self.free_offsets[i] < start + length:
            raise RuntimeError(f"{self.name}: region {start}+{length} given back twice")
        if i > 0:
            prev = self.free_offsets[i - 1]
            if prev + self.free_sizes[prev] > start:
                raise RuntimeError(f"{self.name}: region {start}+{length} given back twice")
            if prev + self.free_sizes[prev] == start:  # merge with the block before
                start, length = prev, self.free_sizes[prev] + length
                self._remove(prev)
        following = start + length
        if following in self.free_sizes:  # and with the block after
            length += self._remove(following)
        self._insert(start, length)

    def _insert(self, start: int, length: int) -> None:
        bisect.insort(self.free_offsets, start)
        self.free_sizes[start] = length

    def _remove(self, start: int) -> int:
        self.free_offsets.pop(bisect.bisect_left(self.free_offsets, start))
        return self.free_sizes.pop(start)


class PlanMismatch(RuntimeError):
    """The emitter asked for other regions than the ones planned (a bug: the
    caller falls back to the placement made while emitting)."""


class Placement:
    """Offsets chosen for one workspace ahead of emission: the k-th region
    taken gets `offsets[k]`."""

    def __init__(self, size: int, regions: list[tuple[int, int]]):
        self.size = size
        self.regions = regions  # (offset, elements) in take order
        self.taken = 0

    def next(self, name: str, n: int) -> int:
        if self.taken >= len(self.regions) or self.regions[self.taken][1] != n:
            raise PlanMismatch(f"{name}: region #{self.taken} of {n} elements was not planned")
        offset = self.regions[self.taken][0]
        self.taken += 1
        return offset


def lifetimes(events: list[tuple[str, str, int, int]]) -> dict[str, list[list[int]]]:
    """Per workspace, [elements, first event, end event] of each region in take
    order (end: the give_back's event index, or past the end if never given back)."""
    end = len(events) + 1
    out: dict[str, list[list[int]]] = {}
    open_: dict[tuple[str, int], list[list[int]]] = {}
    for t, (kind, ws, offset, n) in enumerate(events):
        if kind == "take":
            region = [n, t, end]
            out.setdefault(ws, []).append(region)
            open_.setdefault((ws, offset), []).append(region)
        else:
            stack = open_[(ws, offset)]
            # zero-size regions share offsets: give back the one of this size
            k = max(i for i, r in enumerate(stack) if r[0] == n)
            stack.pop(k)[2] = t
    return out


def plan_offline(
    events: list[tuple[str, str, int, int]], dtypes: dict[str, np.dtype]
) -> dict[str, Placement]:
    """Place every region knowing all lifetimes at once ("greedy by size", as
    TFLite's arena planner): in some order, each region goes into the smallest
    gap left by the regions already placed whose lifetimes overlap its own.
    Three orders are tried (largest first; largest size x lifetime first;
    longest-lived first) and the smallest workspace kept: on the perf
    workloads one of them always reaches the peak of live bytes, where placing
    in program order can strand space behind a long-lived value."""
    plans = {}
    for ws, regions in lifetimes(events).items():
        align = max(1, ALIGN_BYTES // np.dtype(dtypes[ws]).itemsize)
        size = np.array([-(-r[0] // align) * align for r in regions], np.int64)
        start = np.array([r[1] for r in regions], np.int64)
        stop = np.array([r[2] for r in regions], np.int64)
        span = stop - start
        orders = (
            np.lexsort((start, -size)),
            np.lexsort((start, -size * span)),
            np.lexsort((-size, -span)),
        )
        best = min((_place(order, size, start, stop) for order in orders), key=lambda p: p[0])
        plans[ws] = Placement(
            best[0], [(int(o), r[0]) for o, r in zip(best[1], regions, strict=True)]
        )
    return plans


def _place(order, size, start, stop) -> tuple[int, np.ndarray]:
    """(workspace elements, offsets): regions placed in `order`, best fit among
    the gaps between already placed regions that are live at the same time."""
    offset = np.full(len(size), -1, np.int64)
    top = 0
    for k in order:
        if size[k] == 0:
            offset[k] = 0
            continue
        clash = (offset >= 0) & (start < stop[k]) & (start[k] < stop) & (size > 0)
        lo, hi = offset[clash], offset[clash] + size[clash]
        by_offset = np.argsort(lo, kind="stable")
        lo, hi = lo[by_offset], hi[by_offset]
        reach = np.concatenate(([0], np.maximum.accumulate(hi)))  # end of what lies below
        gaps = np.concatenate((lo, [np.iinfo(np.int64).max])) - reach
        fits = np.nonzero(gaps >= size[k])[0]
        offset[k] = reach[fits[np.argmin(gaps[fits])]]
        top = max(top, int(offset[k] + size[k]))
    return top, offset


def check_disjoint(events: list[tuple[str, str, int, int]]) -> None:
    """Raise if two regions of one workspace overlap while both are live.

    `events` are ("take" | "give_back", workspace, offset, elements) in program
    order. Independent of `Workspace`'s free lists: a bug there would be a
    silently wrong result, so every generated kernel is checked (cheap)."""
    live: dict[str, list[tuple[int, int]]] = {}
    for kind, ws, offset, n in events:
        if n == 0:
            continue
        regions = live.setdefault(ws, [])
        i = bisect.bisect_left(regions, (offset, -1))
        if kind == "take":
            if (i > 0 and sum(regions[i - 1]) > offset) or (
                i < len(regions) and regions[i][0] < offset + n
            ):
                other = regions[i - 1] if i > 0 and sum(regions[i - 1]) > offset else regions[i]
                raise RuntimeError(
                    f"{ws}: region {offset}+{n} overlaps live region {other[0]}+{other[1]}"
                )
            regions.insert(i, (offset, n))
        else:
            if i >= len(regions) or regions[i] != (offset, n):
                raise RuntimeError(f"{ws}: region {offset}+{n} freed but not live")
            regions.pop(i)


@dataclass(frozen=True)
class MemoryReport:
    """Memory of one generated kernel's arrays, in bytes.

    workspace_bytes: the workspace array of each dtype (temporaries, reused);
    output_bytes:    the arrays returned to the caller;
    peak_live_bytes: the most bytes of temporaries live at one point of the
                     schedule, all dtypes together (no placement can need less);
    no_reuse_bytes:  what the workspaces would need with one region per temporary;
    temporaries:     how many values got a workspace region;
    loops:           the same record for each scan body's kernel (its workspace
                     is allocated on every step, so it adds to the peak).

    Values run by NumPy between Numba segments (nodes without code generation,
    and graphs whose work is all in loops) allocate their own arrays and are not
    counted. A kernel cut into Numba segments (around loops or NumPy-run nodes)
    sums their workspaces (a segment's values returned to the driver keep its
    workspace alive); its peak is the largest segment's."""

    workspace_bytes: dict = field(default_factory=dict)
    output_bytes: int = 0
    peak_live_bytes: int = 0
    no_reuse_bytes: int = 0
    temporaries: int = 0
    loops: tuple = ()

    @property
    def total_workspace_bytes(self) -> int:
        return sum(self.workspace_bytes.values())

    def __str__(self) -> str:
        per = ", ".join(f"{d} {_kib(b)}" for d, b in sorted(self.workspace_bytes.items()))
        text = (
            f"workspace {_kib(self.total_workspace_bytes)}"
            + (f" ({per})" if per else "")
            + f", peak live {_kib(self.peak_live_bytes)}, without reuse "
            f"{_kib(self.no_reuse_bytes)}, outputs {_kib(self.output_bytes)}"
        )
        if self.loops:
            text += "; loop bodies: " + "; ".join(str(m) for m in self.loops)
        return text

    @staticmethod
    def combine(parts: list[MemoryReport], loops: tuple = ()) -> MemoryReport:
        """One record for the segments of one kernel (run one after the other)."""
        per: dict[str, int] = {}
        for p in parts:
            for d, b in p.workspace_bytes.items():
                per[d] = per.get(d, 0) + b
        return MemoryReport(
            per,
            sum(p.output_bytes for p in parts),
            max((p.peak_live_bytes for p in parts), default=0),
            sum(p.no_reuse_bytes for p in parts),
            sum(p.temporaries for p in parts),
            loops,
        )


def _kib(n: int) -> str:
    return (
        f"{n} B"
        if n < 10_000
        else f"{n / 1024:.1f} KiB"
        if n < 10 << 20
        else f"{n / (1 << 20):.1f} MiB"
    )
