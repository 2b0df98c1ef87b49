"""Numba kernels built in a background thread, for tiered execution.

A compiled function that meets a new input signature can answer at once with
the NumPy interpreter on the signature's optimized graph while its Numba
kernel is built here (see `CompiledFunction` in compiler.py and
TRACEGRAD_TIERED). One worker thread builds the submitted graphs in order
(Numba's compiler lock lets one compile run at a time anyway):

    >>> import numpy as np
    >>> from tracegrad.ir.graph import Graph
    >>> from tracegrad.ops.core import Aval
    >>> g = Graph(name="twice")
    >>> x = g.add_input(Aval((2,), np.dtype("float64")), "x")
    >>> g.outputs.append(g.new_node("add", (x, x), {}, x.aval))
    >>> build = submit(g)
    >>> build.wait() and build.kernel(np.array([1.0, 2.0]))
    (array([2., 4.]),)

Process life:
  - exit: the worker is a daemon thread; an exit hook (threading's, which runs
    before atexit handlers, so Numba has not begun shutting down) drops the builds
    still queued, but first calls' kernels, and gives the one in flight and those
    TRACEGRAD_EXIT_WAIT seconds (default 5) to finish, so that their kernels reach
    the disk cache and the next process loads them. Past that the rest is dropped
    and the build in flight interrupted (`_ExitInterrupt`, raised in the worker the
    next time it runs Python code: Numba's compiler releases its locks and LLVM is
    idle before exit goes on; a compile left running at interpreter exit can crash
    the process), so exit waits at most that long plus one LLVM call;
  - first calls: their builds are submitted held (`hold=True`) and start once the
    interpreter's first result is out, so Numba's import and compile do not compete
    with it for the GIL;
  - fork: this module holds none of its locks across a compile, and the fork
    waits for a Numba compile in flight (runtime/numba_loader.py). In the child the
    worker thread is gone: its lock is new, the builds that threads were running
    go back to the front of the queue, and a worker starts again the next time a
    build is submitted, waited for or its result asked for (`ensure_worker`).
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("tracegrad")

_COND = threading.Condition(threading.Lock())
_QUEUE: collections.deque[KernelBuild] = collections.deque()
_DIRECT: set[KernelBuild] = set()  # builds other threads run themselves (run_now)
_STATE: dict[str, Any] = {
    "worker": None,
    "pid": None,
    "current": None,
    "closing": False,
    "atexit": False,
}


class KernelBuild:
    """One graph's kernel, built by the background worker.

    `kernel` is None until the build ends; `done` says whether it has ended
    (`error` holds an exception the build raised; a cancelled build ends with
    neither). `seconds` is the build's own time, `queued` the wait before it."""

    def __init__(
        self,
        graph,
        index_key: str | None = None,
        on_done: Callable[[KernelBuild], None] | None = None,
        builder: Callable[[], Any] | None = None,
        hold: bool = False,
    ):
        self.graph = graph
        self.index_key = index_key
        self.on_done = on_done
        self.builder = builder  # builds the kernel instead of codegen.build_kernel
        self.kernel = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.seconds: float | None = None
        self.queued: float | None = None
        self._submitted = time.perf_counter()
        self._done = threading.Event()
        self._released = threading.Event()  # (held: the worker waits for `release`)
        self.first_call = hold  # (held builds are first calls': see _wanted_at_exit)
        if not hold:
            self._released.set()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the build to end; True if it has."""
        self.release()
        if not self._done.is_set():
            ensure_worker()
        return self._done.wait(timeout)

    def release(self) -> None:
        """Let the worker start a held build (`submit(hold=True)`)."""
        self._released.set()

    def cancel(self) -> None:
        """Skip the build if it has not started (its result is no longer wanted)."""
        self.cancelled = True

    def _run(self) -> None:
        from tracegrad.codegen.kernel import build_kernel

        t0 = time.perf_counter()
        self.queued = t0 - self._submitted
        kernel = None
        try:
            if not self.cancelled:
                kernel = (
                    self.builder()
                    if self.builder is not None
                    else build_kernel(self.graph, index_key=self.index_key)
                )
        except Exception as exc:  # whoever needs the kernel rebuilds it and sees the error
            self.error = exc
            log.warning(
                "codegen %s: background build failed: %s: %s",
                getattr(self.graph, "name", "?"),
                type(exc).__name__,
                exc,
            )
        self.seconds = time.perf_counter() - t0
        self.kernel = kernel  # last: readers take a non-None kernel as "ready"
        self._finish()

    def _finish(self) -> None:
        if self.on_done is not None and self.kernel is not None:
            try:
                self.on_done(self)
            except Exception as exc:  # a callback's bug must not kill the worker
                log.warning("codegen: background build callback failed: %s", exc)
        self._done.set()


# A held build starts at most this long after the worker reaches it.
HOLD_MAX_S = 2.0
# At exit, how long an interrupted build may take to stop (it stops at its next Python
# bytecode: after the LLVM call in progress).
EXIT_INTERRUPT_JOIN_S = 60.0


def submit(
    graph,
    index_key: str | None = None,
    on_done: Callable[[KernelBuild], None] | None = None,
    builder: Callable[[], Any] | None = None,
    hold: bool = False,
) -> KernelBuild:
    """Queue `graph`'s kernel (codegen.build_kernel, or `builder()`: a shape-generic
    kernel, codegen/shape_generic.py) for the background worker. `hold`: the worker
    starts it only once `build.release()` is called (or HOLD_MAX_S later): a first
    call's interpreter answers before Numba's import and compile compete for the GIL."""
    build = KernelBuild(graph, index_key, on_done, builder, hold)
    with _COND:
        if _STATE["closing"]:  # interpreter exit: nothing new starts
            build._done.set()
            return build
        _QUEUE.append(build)
        _COND.notify()
    ensure_worker()
    return build


def run_now(build: KernelBuild) -> bool:
    """Build `build` in the calling thread if it is still waiting in the queue (True);
    False if the worker has it already. For callers that need this one kernel now
    (`lower()`), rather than after every build queued before it."""
    with _COND:
        try:
            _QUEUE.remove(build)
        except ValueError:
            return False
        _DIRECT.add(build)
    try:
        build._run()
    finally:
        with _COND:
            _DIRECT.discard(build)
    return True


def pending() -> int:
    """Builds queued or running."""
    with _COND:
        return len(_QUEUE) + (_STATE["current"] is not None)


def wait_idle(timeout: float | None = None) -> bool:
    """Wait until no build is queued or running; True if none is. Held builds are
    released first, so that the wait ends (for tests that measure memory or time
    and must not count a kernel an earlier call left building)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with _COND:
        for build in [*_QUEUE, _STATE["current"]]:
            if build is not None:
                build.release()
    ensure_worker()
    with _COND:
        while _QUEUE or _STATE["current"] is not None or _DIRECT:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            _COND.wait(0.1 if left is None else min(left, 0.1))  # (run_now does not notify)
    return True


def ensure_worker() -> None:
    """Start the worker thread if this process has none (first use, or a forked child)."""
    if _STATE["worker"] is not None and _STATE["pid"] == os.getpid():
        return
    with _COND:
        if _STATE["closing"] or (_STATE["worker"] is not None and _STATE["pid"] == os.getpid()):
            return
        worker = threading.Thread(target=_work, name="tracegrad-kernel-builder", daemon=True)
        _STATE["worker"], _STATE["pid"] = worker, os.getpid()
        if not _STATE["atexit"]:
            _STATE["atexit"] = True
            _at_exit(_shutdown)
        worker.start()


def _at_exit(fn: Callable[[], None]) -> None:
    """Run `fn` at interpreter exit before any atexit handler: threading's own exit
    hooks run first (concurrent.futures uses them too), so Numba and llvmlite have
    not started shutting down while the compile in flight finishes."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(fn)
            return
    except RuntimeError:  # exit has begun: too late for threading's hooks
        pass
    atexit.register(fn)


class _ExitInterrupt(BaseException):
    """Raised in the worker at interpreter exit to cut a build short (a BaseException,
    so that no `except Exception` in Numba's compiler swallows it)."""


def _work() -> None:
    build = None
    try:
        while True:
            with _COND:
                while not _QUEUE and not _STATE["closing"]:
                    _COND.wait()
                if not _QUEUE:  # closing, and nothing left that exit waits for
                    return
                build = _STATE["current"] = _QUEUE.popleft()
            try:
                build._released.wait(HOLD_MAX_S)  # (exit cancels a build still held)
                build._run()
            finally:
                with _COND:
                    _STATE["current"] = None
                    _COND.notify_all()
    except _ExitInterrupt:  # interpreter exit (_shutdown): this build ends unbuilt
        # (no blocking on _COND here: the interrupt may have come while it was taken)
        if build is not None and not build.done:
            build.cancel()
            build._done.set()


def _wanted_at_exit(build: KernelBuild) -> bool:
    """A first call's kernel (submitted held, released by its result) is built at exit,
    within TRACEGRAD_EXIT_WAIT, even if the worker had not reached it: the next process
    then loads it. Other queued builds (more shapes, templates) are dropped."""
    return build.first_call and build._released.is_set()


def _shutdown() -> None:
    """At interpreter exit: drop the queued builds but first calls', give the one in
    flight and those TRACEGRAD_EXIT_WAIT seconds, then interrupt."""
    with _COND:
        _STATE["closing"] = True
        dropped = [b for b in _QUEUE if not _wanted_at_exit(b)]
        kept = [b for b in _QUEUE if _wanted_at_exit(b)]
        _QUEUE.clear()
        _QUEUE.extend(kept)
        _COND.notify_all()
        worker = _STATE["worker"]
        current = _STATE["current"]
        if current is not None and not current._released.is_set():
            current.cancel()  # held: not started, and no result waits for it
            current.release()
    for build in dropped:
        build.cancel()
        build._done.set()
    if (
        worker is not None
        and worker is not threading.current_thread()
        and _STATE["pid"] == os.getpid()
    ):
        from tracegrad import config

        wait = config.exit_wait()
        worker.join(None if wait == float("inf") else wait)
        if not worker.is_alive():
            return
        with _COND:  # out of time: nothing more starts
            left = list(_QUEUE)
            _QUEUE.clear()
            running = _STATE["current"] is not None
            _COND.notify_all()
        for build in left:
            build.cancel()
            build._done.set()
        if running and worker.ident is not None:
            log.info("background build still running after %.1f s at exit: interrupted", wait)
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(worker.ident), ctypes.py_object(_ExitInterrupt)
            )
        # the interrupt lands once the compile is back in Python code (one LLVM call);
        # a worker stuck past that is not compiling: exit goes on without it
        worker.join(EXIT_INTERRUPT_JOIN_S)
    else:
        for build in kept:  # no worker here to build them
            build.cancel()
            build._done.set()


def _after_fork_in_child() -> None:
    global _COND
    _COND = threading.Condition(threading.Lock())
    lost = [_STATE["current"], *_DIRECT]  # their threads are gone: build them again here
    _QUEUE.extendleft(b for b in lost if b is not None and not b.done)
    _DIRECT.clear()
    _STATE["current"] = None
    _STATE["worker"] = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
