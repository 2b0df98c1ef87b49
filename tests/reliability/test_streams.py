"""tracegrad's background Numba compiles leave sys.stdout and sys.stderr alone.

Numba builds each error message (many per compile: its type inference raises and
catches them) inside colorama's init()/deinit(), which rebind both streams and put back
the ones of the moment init ran. From the background kernel builder that undid the main
thread's own redirection: doctests printed to the real stdout and "got nothing"."""

import contextlib
import io
import sys
import threading

import pytest

from tracegrad.runtime.numba_loader import import_numba


@pytest.fixture(autouse=True)
def numba_with_colorama():
    """Numba uses colorama's shell only where colorama is installed (CI's venv has none:
    there the streams are never rebound)."""
    pytest.importorskip("colorama")
    import_numba()


def test_a_numba_error_message_keeps_a_stream_swapped_meanwhile():
    import_numba()
    from numba.core import errors

    ours, saved = io.StringIO(), sys.stdout
    try:
        shell = errors.ColorShell()  # a compile in another thread starts a message
        sys.stdout = ours  # the main thread redirects its output meanwhile
        with shell:
            pass
        errors.TypingError("a message built during a compile")
        assert sys.stdout is ours
    finally:
        sys.stdout = saved


def test_redirected_prints_arrive_while_another_thread_builds_numba_errors():
    import_numba()
    from numba.core import errors

    stop = threading.Event()

    def build_messages():
        while not stop.is_set():
            errors.TypingError("a message built during a compile")

    worker = threading.Thread(target=build_messages, daemon=True)
    worker.start()
    try:
        lost = []
        for i in range(3000):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                for _ in range(20):
                    print(i)
            if out.getvalue() != f"{i}\n" * 20:
                lost.append(i)
        assert not lost, f"{len(lost)} of 3000 redirected blocks lost output"
    finally:
        stop.set()
        worker.join()
