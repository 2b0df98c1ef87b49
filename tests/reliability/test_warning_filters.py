"""tracegrad's background Numba compiles leave the process's warning filters alone.

Numba's type inference runs inside `warnings.catch_warnings(record=True)`, which before
Python 3.14 saves and restores process-wide state. From the background kernel builder
that undid the main thread's own `catch_warnings` blocks (pytest's, around every test):
once, every warning stayed an error for the rest of CI's run
(tracegrad/runtime/numba_warnings.py)."""

import threading
import warnings

import numpy as np
import pytest

from tracegrad.runtime.numba_loader import import_numba


class _OursWarning(UserWarning):
    pass


def _in_thread(body):
    """Run `body(entered, leave)` in a thread; return (thread, entered, leave)."""
    entered, leave = threading.Event(), threading.Event()
    thread = threading.Thread(target=body, args=(entered, leave))
    thread.start()
    assert entered.wait(30)
    return thread, leave


def test_numba_type_inference_in_another_thread_keeps_the_main_threads_filters():
    import_numba()
    from numba.core import errors

    def numba_typing(entered, leave):  # what typeinfer does for each function it types
        with errors.WarningsFixer(errors.NumbaWarning).catch_warnings():
            entered.set()
            leave.wait(30)

    before = warnings.filters[:]
    with warnings.catch_warnings():
        thread, leave = _in_thread(numba_typing)  # a compile starts inside the block...
    with warnings.catch_warnings():
        warnings.simplefilter("error", _OursWarning)  # ...the user's next block begins
        leave.set()
        thread.join()  # the compile ends inside it: the user's filter must still hold
        with pytest.raises(_OursWarning):
            warnings.warn("still an error", _OursWarning, stacklevel=1)
    assert warnings.filters == before  # and nothing of the compile's is left after


def test_a_block_that_ends_during_a_compile_is_not_put_back_afterwards():
    import_numba()
    from numba.core import errors

    def numba_typing(entered, leave):
        with errors.WarningsFixer(errors.NumbaWarning).catch_warnings():
            entered.set()
            leave.wait(30)

    before = warnings.filters[:]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every warning an error, inside this block only
        thread, leave = _in_thread(numba_typing)
    leave.set()
    thread.join()
    assert warnings.filters == before  # (the bug: the block's "error" filter came back)


def test_the_main_thread_keeps_numbas_own_behaviour():
    """In the thread that runs it, Numba's catch_warnings works as before: it records."""
    import_numba()
    from numba.core import errors

    fixer = errors.WarningsFixer(_OursWarning)
    with fixer.catch_warnings(filename="f.py", lineno=3):
        warnings.warn("recorded, then emitted at flush", _OursWarning, stacklevel=1)
    with pytest.warns(_OursWarning, match="recorded"):
        fixer.flush()


@pytest.mark.numba_pass
def test_a_background_build_leaves_a_user_block_alone():
    """End to end: a kernel built by the background thread while the main thread sits
    in its own catch_warnings block; the filters are the block's throughout."""
    import tracegrad as tg
    from tracegrad.codegen import background

    def fn(x):
        return tg.sum(tg.tanh(x) * tg.sin(x) + 0.25 * x)

    g = tg.grad(fn, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", _OursWarning)
        mine = warnings.filters
        g(np.linspace(0.0, 1.0, 7))
        assert background.wait_idle(timeout=300)
        assert warnings.filters is mine
