"""Compiling and launching the CUDA units of plan.py.

Kernel sources are compiled by numba.cuda once per source text (an in-memory
cache shared by every graph: the same fused group in two functions is one
kernel); each unit's launch configuration is fixed when the graph is planned,
so a call is a list of launches with no host synchronisation until the caller
reads a result.

GEMMs: on a real GPU with CuPy, `cupy.matmul` on strided views of the buffers
(cuBLAS, batched when there is a batch); otherwise a tiled numba.cuda kernel
that reads both operands through their strides (transposed operands are never
copied). Under the simulator that kernel is what runs.
"""

from __future__ import annotations

import hashlib
import threading

import numpy as np

from tracegrad.codegen.cuda.kernel_text import RANGE_FLAG
from tracegrad.codegen.cuda.plan import Plan, Unit, place_temporaries, plan_graph
from tracegrad.codegen.cuda.prelude import PRELUDE
from tracegrad.placement import DeviceArray, as_device_array, load_cuda

_COMPILE_LOCK = threading.Lock()
_KERNELS: dict[str, object] = {}  # source text -> numba.cuda kernel
_MODULES: list[str] = []  # the kernels' modules (runtime/cache.py), for clear()
_PRELUDE_NS: dict | None = None
# compiled: kernels compiled by this process; hits: found compiled in memory;
# file_hits: kernel modules read from their verified files in the disk cache;
# planned / plans_loaded: graphs planned here / plans read from the disk cache (disk.py)
# scan_copies: device copies of loop results into their slots (scan bodies write in place)
STATS = {
    "compiled": 0,
    "hits": 0,
    "file_hits": 0,
    "planned": 0,
    "plans_loaded": 0,
    "scan_copies": 0,
}


def prelude_names() -> dict:
    """The prelude's device functions and imports (`cuda`, `np`, `math`): what every
    kernel module puts in its globals."""
    return _prelude()


def _prelude() -> dict:
    global _PRELUDE_NS
    if _PRELUDE_NS is None:
        load_cuda()
        ns: dict = {}
        exec(compile(PRELUDE, "<tracegrad cuda prelude>", "exec"), ns)
        _PRELUDE_NS = ns
    return _PRELUDE_NS


def canonical(source: str, name: str) -> str:
    """The kernel without its comments (IR lines) and under one name: what is
    compiled, so equal kernels of different nodes (a chain's layers) compile once."""
    lines = [ln for ln in source.splitlines() if not ln.lstrip().startswith("#")]
    text = "\n".join(lines) + "\n"
    return text.replace(f"def {name}(", "def tg_kernel(", 1)


_PRELUDE_HASH = hashlib.sha256(PRELUDE.encode()).hexdigest()[:16]


def module_text(canonical_source: str) -> str:
    """A kernel's module, as the disk cache stores it: the prelude's names, then
    the kernel (the prelude's hash is in the text, so a new prelude is a new file)."""
    return (
        f"# tracegrad CUDA kernel (codegen/cuda/runtime.py); prelude {_PRELUDE_HASH}\n"
        "from tracegrad.codegen.cuda.runtime import prelude_names as _tg_prelude_names\n\n"
        "globals().update(_tg_prelude_names())\n\n\n" + canonical_source
    )


def kernel_for(source: str, name: str):
    """The numba.cuda kernel of one unit's source, compiled once per canonical text.

    The source is a module in the disk cache (runtime/cache.py: a hash-named file,
    written once, verified before it is run), as the CPU kernels' are."""
    key = canonical(source, name)
    k = _KERNELS.get(key)
    if k is not None:
        STATS["hits"] += 1
        return k
    with _COMPILE_LOCK:
        k = _KERNELS.get(key)
        if k is None:
            from tracegrad.runtime.cache import load_source

            cuda = load_cuda()
            _prelude()
            module, _path, status = load_source(module_text(key))
            if status == "file hit":
                STATS["file_hits"] += 1
            _MODULES.append(module.__name__)
            k = cuda.jit(module.tg_kernel)
            _KERNELS[key] = k
            STATS["compiled"] += 1
    return k


def clear() -> None:
    """Forget the compiled kernels (and let their modules leave sys.modules)."""
    from tracegrad.runtime import cache

    _KERNELS.clear()
    while _MODULES:
        cache.unload(_MODULES.pop())


# ------------------------------------------------------------------ GEMM

_GEMM_SOURCE = """
def tg_gemm_tiled(a, b, c, offs_a, offs_b, m, n, k, sa0, sa1, sb0, sb1):
    ta = cuda.shared.array((TILE, TILE), DTYPE)
    tb = cuda.shared.array((TILE, TILE), DTYPE)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    bat = cuda.blockIdx.z
    oa = offs_a[bat]
    ob = offs_b[bat]
    acc = DTYPE(0)
    for p0 in range(0, k, TILE):
        pa = p0 + tx
        pb = p0 + ty
        ta[ty, tx] = a[oa + row * sa0 + pa * sa1] if (row < m and pa < k) else DTYPE(0)
        tb[ty, tx] = b[ob + pb * sb0 + col * sb1] if (pb < k and col < n) else DTYPE(0)
        cuda.syncthreads()
        for q in range(TILE):
            acc += ta[ty, q] * tb[q, tx]
        cuda.syncthreads()
    if row < m and col < n:
        c[bat * m * n + row * n + col] = acc
"""


def _gemm_kernel(dtype: np.dtype, tile: int):
    src = (
        _GEMM_SOURCE.replace("TILE", str(tile))
        .replace("DTYPE", f"np.{np.dtype(dtype).name}")
        .replace("tg_gemm_tiled", f"tg_gemm_tiled_{np.dtype(dtype).name}_{tile}")
    )
    return kernel_for(src, f"tg_gemm_tiled_{np.dtype(dtype).name}_{tile}")


def _view(flat, offset: int, shape: tuple) -> DeviceArray:
    """A DeviceArray of `shape` over `flat[offset:]` (a view, no copy)."""
    size = int(np.prod(shape, dtype=np.int64))
    data = flat[offset : offset + max(size, 1)] if (offset or flat.shape[0] != size) else flat
    return DeviceArray(data, shape)


def _cupy():
    try:
        import cupy
    except Exception:
        return None
    return cupy


# ------------------------------------------------------------------ the kernel


class CudaKernel:
    """An optimized graph as CUDA launches: `kernel(*device arrays)` returns a
    tuple of DeviceArray, one per graph output.

    `source` holds every kernel's source, with the IR lines it computes. Made from
    the graph (planned here), or from a plan loaded from the disk cache (disk.py:
    then `graph_factory` rebuilds the graph if an error message needs it).

    Gathers by data (take_along_axis, put_along_axis_add, nll_loss) set a range flag
    for an index outside [-n, n); the call reads it once at its end (one small copy
    to the host, only in kernels that have such gathers, loop bodies' included) and
    raises the CPU path's OutOfRangeError, found by running the graph's interpreter on
    the host copies of the inputs."""

    source_path = None

    def __init__(
        self,
        graph=None,
        *,
        plan: Plan | None = None,
        graph_factory=None,
        name: str | None = None,
        n_inputs: int | None = None,
    ):
        cuda = load_cuda()
        self.cuda = cuda
        from tracegrad.placement import is_simulated

        self.simulated = is_simulated()
        self._graph = graph
        self._graph_factory = graph_factory
        if plan is None:
            plan = plan_graph(graph, simulated=self.simulated)
            STATS["planned"] += 1
        self.plan: Plan = plan
        self.graph_name = graph.name if graph is not None else str(name)
        self.n_inputs = len(graph.inputs) if graph is not None else int(n_inputs or 0)
        self._nested: list[CudaKernel] = []  # loop bodies' and branches' kernels
        self.cupy = None if self.simulated else _cupy()
        self.tile = 4 if self.simulated else 16
        self.consts = {
            name: cuda.to_device(b.value)
            for name, b in self.plan.buffers.items()
            if b.kind == "const"
        }
        self._lock = threading.Lock()
        self._scratch: dict | None = None
        self.workspace_bytes = 0  # the temporaries' device memory (after the first call)
        self._fresh: list = []
        self._inputs: list = []
        self.launches = []  # (callable, args names) per unit, compiled now
        for unit in self.plan.units:
            self.launches.append(self._prepare(unit))
        self.source = self._source_text()
        self.checks_range: bool = RANGE_FLAG in self.plan.buffers or any(
            bool(k.checks_range) for k in self._nested
        )

    @property
    def graph(self):
        """The optimized graph (rebuilt on first use for a kernel loaded from disk)."""
        if self._graph is None and self._graph_factory is not None:
            self._graph = self._graph_factory()
        return self._graph

    def _source_text(self) -> str:
        parts = [f"# CUDA kernels of {self.graph_name} ({len(self.plan.units)} units)"]
        for u in self.plan.units:
            parts.append(f"# unit {u.name} ({u.kind}): {', '.join(u.nodes)}")
            if u.source:
                parts.append(u.source)
            parts.extend(source for _name, source, _args, _launch in u.after)
        return "\n".join(parts)

    def _prepare(self, unit: Unit):
        if unit.kind == "gemm":
            return self._prepare_gemm(unit)
        if unit.kind == "scan":
            return self._prepare_scan(unit)
        if unit.kind in ("while", "cond"):
            return self._prepare_control(unit)
        # (configured per launch: the simulator's kernel[grid, block] configures the
        # kernel object itself, so two units sharing a kernel would share one config)
        k = kernel_for(unit.source, unit.name)
        launches = [(k, unit.launch, unit.args)]
        for name, source, args, launch in unit.after:
            launches.append((kernel_for(source, name), launch, args))

        def run(env):
            for kern, config, names in launches:
                kern[config](*[env[a] for a in names])

        return run

    def _prepare_scan(self, unit: Unit):
        """The body's own CudaKernel, called once per step from the host (its launches
        are asynchronous: no synchronisation inside the loop); xs steps are views.
        The body writes each step's ys straight into their slots of the packed output,
        and its carries into two buffers in turn (the last step: into the output's
        carry slots), so a step is the body's launches alone: no copies, no
        allocations. An output the body cannot write in place (one buffer returned
        twice) is copied into its slot, as before (STATS["scan_copies"])."""
        sp = unit.scan
        body = CudaKernel(sp["body"])
        self._nested.append(body)
        length, reverse = sp["length"], sp["reverse"]
        n_carry, n_xs = sp["n_carry"], sp["n_xs"]
        operands, parts = sp["operands"], sp["parts"]
        ys_at = []  # (offset of the stacked y, size of one step)
        pos = sum(parts[:n_carry])
        for size in parts[n_carry:]:
            ys_at.append((pos, size // max(length, 1)))
            pos += size
        carry_at = [sum(parts[:c]) for c in range(n_carry)]
        sizes = list(parts[:n_carry]) + [size for _, size in ys_at]
        own = body.own_outputs()
        direct = {k for k, size in enumerate(sizes) if own.get(k) == size and size > 0}
        spare: list[list] = [[None, None] for _ in range(n_carry)]  # carries' two buffers

        def run(env):
            ops = [_view(env[b], off, shape) for b, off, shape in operands]
            carry = ops[:n_carry]
            xs = ops[n_carry : n_carry + n_xs]
            consts = ops[n_carry + n_xs :]
            out = env[sp["out"]]
            for t in range(length):
                i = length - 1 - t if reverse else t
                steps = []
                for x in xs:
                    step = int(np.prod(x.shape[1:], dtype=np.int64))
                    steps.append(DeviceArray(x.flat_data()[i * step : (i + 1) * step], x.shape[1:]))
                into = {}
                for c in range(n_carry):
                    if c not in direct:
                        continue
                    if t == length - 1:
                        into[c] = out[carry_at[c] : carry_at[c] + sizes[c]]
                    else:
                        if spare[c][t % 2] is None:
                            spare[c][t % 2] = body.new_output(c)
                        into[c] = spare[c][t % 2]
                for j, (at, size) in enumerate(ys_at):
                    if n_carry + j in direct:
                        into[n_carry + j] = out[at + i * size : at + (i + 1) * size]
                # (range flags: read at the end of the outer call)
                outs = body.launch(*carry, *steps, *consts, into=into)
                carry = list(outs[:n_carry])
                for j, ((at, size), y) in enumerate(zip(ys_at, outs[n_carry:], strict=True)):
                    if n_carry + j not in direct:
                        out[at + i * size : at + (i + 1) * size].copy_to_device(y.flat_data())
                        STATS["scan_copies"] += 1
            for c, (size, value) in enumerate(zip(parts[:n_carry], carry, strict=True)):
                if length == 0 or c not in direct:
                    out[carry_at[c] : carry_at[c] + size].copy_to_device(value.flat_data())
                    STATS["scan_copies"] += 1

        return run

    def _prepare_control(self, unit: Unit):
        """while_loop / cond: the graphs' own CudaKernels; the host reads each
        predicate (a synchronisation), then the results go into the packed output."""
        sp = unit.scan
        operands, parts = sp["operands"], sp["parts"]
        if unit.kind == "while":
            cond, body = CudaKernel(sp["cond"]), CudaKernel(sp["body"])
            self._nested += [cond, body]
            n_carry = sp["n_carry"]
            n_cond = len(sp["cond"].inputs) - n_carry
        else:
            branches = (CudaKernel(sp["false"]), CudaKernel(sp["true"]))
            self._nested += list(branches)

        def run(env):
            ops = [_view(env[b], off, shape) for b, off, shape in operands]
            if unit.kind == "while":
                carry, consts = ops[:n_carry], ops[n_carry:]
                while bool(np.asarray(cond.launch(*carry, *consts[:n_cond])[0])):
                    carry = list(body.launch(*carry, *consts[n_cond:]))
                results = carry
            else:
                results = branches[bool(np.asarray(ops[0]))].launch(*ops[1:])
            out, pos = env[sp["out"]], 0
            for size, r in zip(parts, results, strict=True):
                out[pos : pos + size].copy_to_device(r.flat_data())
                pos += size

        return run

    def _prepare_gemm(self, unit: Unit):
        g = unit.gemm
        la, lb = g["a"], g["b"]
        m, n, k, nb = g["m"], g["n"], g["k"], g["batch"]
        sa0, sa1 = la.strides[-2:]
        sb0, sb1 = lb.strides[-2:]
        dtype = g["dtype"]
        if self.cupy is not None and dtype.kind == "f":
            return self._cupy_gemm(unit)
        if dtype.kind != "f":
            dtype = np.dtype(dtype)
        kern = _gemm_kernel(dtype, self.tile)
        t = self.tile
        config = ((-(-n // t), -(-m // t), nb), (t, t))
        offs_a = self.cuda.to_device(g["offs_a"])
        offs_b = self.cuda.to_device(g["offs_b"])
        a, b, c = unit.args

        def run(env):
            kern[config](env[a], env[b], env[c], offs_a, offs_b, m, n, k, sa0, sa1, sb0, sb1)

        return run

    def _cupy_gemm(self, unit: Unit):
        """cuBLAS through CuPy, on strided views of the flat buffers (no copies)."""
        cp = self.cupy
        g = unit.gemm
        la, lb = g["a"], g["b"]
        m, n, nb = g["m"], g["n"], g["batch"]
        item = g["dtype"].itemsize
        batch_shape = (nb,)
        a_name, b_name, c_name = unit.args

        def view(flat, lay, offs):
            base = cp.asarray(flat)
            if nb == 1 or np.all(np.diff(offs) == (offs[1] - offs[0] if nb > 1 else 0)):
                bstride = int(offs[1] - offs[0]) if nb > 1 else 0
                shape = (*batch_shape, *lay.shape[-2:])
                strides = (bstride * item, *(s * item for s in lay.strides[-2:]))
                return cp.lib.stride_tricks.as_strided(base[int(offs[0]) :], shape, strides)
            return cp.stack(
                [
                    cp.lib.stride_tricks.as_strided(
                        base[int(o) :], lay.shape[-2:], tuple(s * item for s in lay.strides[-2:])
                    )
                    for o in offs
                ]
            )

        def run(env):
            a = view(env[a_name], la, g["offs_a"])
            b = view(env[b_name], lb, g["offs_b"])
            c = cp.asarray(env[c_name]).reshape(nb, m, n)
            cp.matmul(a, b, out=c)

        return run

    # ---- a call
    def _alloc(self, size: int, dtype):
        if self.cupy is not None:  # CuPy's memory pool: no cudaMalloc per call
            return self.cuda.as_cuda_array(self.cupy.empty(size, dtype=dtype))
        return self.cuda.device_array(size, dtype=dtype)

    def _scratch_buffers(self) -> dict:
        """Temporaries no output uses: allocated once, reused by every call (calls
        enqueue their launches under one lock, on one stream, so they never overlap)."""
        if self._scratch is None:
            returned = {lay.buf for lay in self.plan.outputs}
            # the temporaries: regions of one workspace per dtype (plan.place_temporaries:
            # the CPU path's allocator, a region reused once its buffer is dead)
            sizes, where = place_temporaries(self.plan)
            spaces = {dt: self._alloc(size, np.dtype(dt)) for dt, size in sizes.items()}
            self._scratch = {
                name: spaces[dt][offset : offset + self.plan.buffers[name].size]
                for name, (dt, offset) in where.items()
            }
            self.workspace_bytes = sum(size * np.dtype(dt).itemsize for dt, size in sizes.items())
            for name, b in self.plan.buffers.items():
                if b.kind == "flag":  # zero until a gather finds an index out of range
                    self._scratch[name] = self.cuda.to_device(np.zeros(b.size, b.dtype))
            self._fresh = [
                (name, b.size, b.dtype)
                for name, b in self.plan.buffers.items()
                if b.kind == "temp" and name in returned
            ]
            self._inputs = [
                (name, b.index, b.dtype)
                for name, b in self.plan.buffers.items()
                if b.kind == "input"
            ]
        return self._scratch

    def __call__(self, *arrays):
        outs = self.launch(*arrays)
        if self.checks_range:
            self._check_range(arrays)
        return outs

    def _range_flags(self) -> list:
        own = self._scratch.get(RANGE_FLAG) if self._scratch is not None else None
        nested = [f for k in self._nested for f in k._range_flags()]
        return ([own] if own is not None else []) + nested

    def _check_range(self, arrays) -> None:
        """Raise the CPU path's error if a gather of this call (or of a loop body it
        ran) met an index out of range; the flags are cleared for the next call."""
        hit = False
        for flag in self._range_flags():
            if flag.copy_to_host()[0]:  # (waits for the call's kernels)
                hit = True
                flag.copy_to_device(np.zeros(1, np.int32))
        if hit:
            raise self._range_error(arrays)

    def _range_error(self, arrays) -> Exception:
        """The interpreter's OutOfRangeError for these inputs (it names the op, the
        index, the axis, the shapes and the user's line), as the CPU kernel raises."""
        from tracegrad.ir.interpret import interpret

        graph = self.graph
        if graph is not None:
            try:
                interpret(graph, *[np.asarray(a) for a in arrays])
            except IndexError as exc:
                return exc
        return IndexError(
            f"{self.graph_name}: an index array holds a value out of range (found by a "
            "gather on the GPU)"
        )

    def own_outputs(self) -> dict[int, int]:
        """Output position -> its buffer's size, for the outputs a caller may give a
        destination (`launch(into=...)`): each in a buffer of its own that every call
        makes fresh."""
        returned = [lay.buf for lay in self.plan.outputs]
        return {
            k: self.plan.buffers[b].size
            for k, b in enumerate(returned)
            if b is not None and returned.count(b) == 1 and self.plan.buffers[b].kind == "temp"
        }

    def new_output(self, k: int):
        """A fresh flat buffer for output `k` (a destination for `launch(into=...)`)."""
        b = self.plan.buffers[self.plan.outputs[k].buf]
        return self._alloc(b.size, b.dtype)

    def launch(self, *arrays, into: dict | None = None):
        """The call's launches, without reading the range flags (loops read them once,
        after their last step). `into`: output position -> the flat device array that
        output is written to (one of `own_outputs`, of its size), instead of a new one."""
        if len(arrays) != self.n_inputs:
            raise TypeError(
                f"{self.graph_name}: expected {self.n_inputs} arrays, got {len(arrays)}"
            )
        with self._lock:
            env = {**self.consts, **self._scratch_buffers()}
            for name, index, dtype in self._inputs:
                arr = as_device_array(arrays[index])
                if arr.dtype != dtype:
                    raise TypeError(
                        f"{self.graph_name}: input {index} has dtype {arr.dtype}, the "
                        f"compiled signature {dtype}"
                    )
                env[name] = arr.flat_data()
            given = {self.plan.outputs[k].buf: a for k, a in (into or {}).items()}
            for name, size, dtype in self._fresh:  # outputs: new buffers every call
                env[name] = given[name] if name in given else self._alloc(size, dtype)
            for run in self.launches:
                run(env)
        return tuple(DeviceArray(env[lay.buf], lay.shape) for lay in self.plan.outputs)
