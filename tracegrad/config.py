"""Every TRACEGRAD_* environment variable, read with one parsing rule.

Switches accept `1/true/yes/on` and `0/false/no/off` (any case); anything else
warns once and keeps the default. `VARIABLES` lists them all (docs/src/configuration.md's
table is checked against it).

    >>> import os, tracegrad.config as config
    >>> os.environ["TRACEGRAD_EAGER_NUMBA"] = "false"
    >>> config.eager_numba()
    False
    >>> del os.environ["TRACEGRAD_EAGER_NUMBA"]
"""

from __future__ import annotations

import functools
import os
import warnings

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})

# pyproject.toml's version, for a source tree that pip never installed (tests check they agree)
_FALLBACK_VERSION = "0.3.4"


@functools.cache
def version() -> str:
    """tracegrad's version, from the installed package's metadata (pyproject.toml's
    `version`); kernel caches are salted with it. `tracegrad.__version__` and
    `config.VERSION` read it on first use.

        >>> import tracegrad, tracegrad.config as config
        >>> tracegrad.__version__ == config.VERSION == config.version()
        True
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version("tracegrad")
    except PackageNotFoundError:
        return _FALLBACK_VERSION


def __getattr__(name: str) -> str:
    if name in ("VERSION", "__version__"):  # computed on first use: see version()
        return version()
    raise AttributeError(f"module 'tracegrad.config' has no attribute {name!r}")


# name -> (default, what it does)
VARIABLES: dict[str, tuple[str, str]] = {
    "TRACEGRAD_CACHE_DIR": (
        "the user cache directory",
        "where generated kernels and their Numba code are cached",
    ),
    "TRACEGRAD_BACKEND": (
        "numba",
        "the backend of compiled functions that name none: numba, "
        "or interpret (the NumPy reference interpreter: no "
        "compiles; to debug or check a kernel)",
    ),
    "TRACEGRAD_LOG": ("0", "log every stage's time and each cache hit or miss"),
    "TRACEGRAD_PARALLEL": (
        "background",
        "multi-core kernel variants: background (built from the kernel's first "
        "call; never under a thread limit of 1), sync (build before returning) or 0 (never)",
    ),
    "TRACEGRAD_TIERED": (
        "first",
        "run a signature on the NumPy interpreter while its kernel "
        "compiles in the background: first (a function's first "
        "signature too, where its graph's estimated interpreter time "
        "per call is under 0.1 s and no backend is named by backend= or "
        "TRACEGRAD_BACKEND; and new signatures once it has a kernel), "
        "shapes (only those new signatures), always, or 0 (never)",
    ),
    "TRACEGRAD_EXIT_WAIT": (
        "5",
        "seconds interpreter exit waits for a background kernel build in "
        "flight (so it reaches the disk cache) before interrupting it",
    ),
    "TRACEGRAD_SHAPE_GENERIC": (
        "shapes",
        "a new shape reuses a shape-generic kernel where its "
        "source differs only in literals: shapes (compiled "
        "by the second shape's build), ahead (also right "
        "after a signature's kernel), or 0 (never)",
    ),
    "TRACEGRAD_EAGER_NUMBA": ("1", "eager mode's Numba kernels for large float64 sin/cos"),
    "TRACEGRAD_NUM_THREADS": (
        "NUMBA_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs (affinity, cgroup quota)",
        "the most threads tracegrad uses at once: parallel kernels, the "
        "eager ufunc split and its BLAS calls (tracegrad.set_num_threads "
        "overrides it)",
    ),
    "TRACEGRAD_EAGER_THREADS": ("TRACEGRAD_NUM_THREADS", "threads for large eager ufuncs only"),
    "TRACEGRAD_OMP_SPINCOUNT": (
        "1000",
        "spins of Numba's OpenMP threads after a parallel region "
        "before they sleep, where tracegrad loads libgomp first "
        "(libgomp's own: 300000); `default` leaves libgomp's "
        "policy alone",
    ),
    "TRACEGRAD_OPENBLAS_TIMEOUT": (
        "17",
        "log2 of the CPU cycles NumPy's OpenBLAS threads spin after a BLAS call "
        "before they sleep, where tracegrad imports NumPy first (OpenBLAS's own: "
        "28, about 0.1 s); `default` leaves OpenBLAS's policy alone",
    ),
    "TRACEGRAD_MALLOC_TUNING": ("1", "let glibc keep freed blocks of up to 32 MB for reuse"),
    "TRACEGRAD_BLAS_FOLLOW_LOAD": (
        "1",
        "during tracegrad's own BLAS calls, OpenBLAS runs on at "
        "most the idle CPUs and the thread limit (its count is "
        "put back after each call)",
    ),
    "TRACEGRAD_NUMBA_SCIPY_PROBE": ("0", "let Numba import scipy.linalg for its BLAS probe"),
    "TRACEGRAD_POISON_FREED": (
        "0",
        "debugging: generated kernels fill each dead float "
        "temporary with NaN, so a read after its lifetime shows",
    ),
}

_warned: set[str] = set()


def _warn(name: str, value: str, expected: str) -> None:
    if name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"{name}={value!r} is not one of {expected}; using the default ({VARIABLES[name][0]})",
            RuntimeWarning,
            stacklevel=3,
        )


def flag(name: str, default: bool) -> bool:
    """A switch: 1/true/yes/on or 0/false/no/off (unset or empty: `default`)."""
    value = os.environ.get(name, "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    _warn(name, value, "1/true/yes/on or 0/false/no/off")
    return default


def log_enabled() -> bool:
    return flag("TRACEGRAD_LOG", False)


def _mode(name: str, default: str, others: tuple[str, ...]) -> str:
    """A setting with named values: unset or a true switch gives `default`, a false
    switch "0"; anything else warns once and gives `default`."""
    value = os.environ.get(name, "").strip().lower()
    if not value or value in _TRUE or value == default:
        return default
    if value in _FALSE:
        return "0"
    if value in others:
        return value
    _warn(name, value, f"{', '.join((default,) + others)}, or a switch")
    return default


def parallel_mode() -> str:
    """ "background" (default), "sync" or "0" (never)."""
    return _mode("TRACEGRAD_PARALLEL", "background", ("sync",))


def tiered_mode() -> str:
    """ "first" (default), "shapes", "always" or "0" (never): see compiler.CompiledFunction."""
    return _mode("TRACEGRAD_TIERED", "first", ("shapes", "always"))


def backend_named() -> bool:
    """Whether TRACEGRAD_BACKEND names a backend (then first calls wait for the kernel)."""
    return bool(os.environ.get("TRACEGRAD_BACKEND", "").strip())


def exit_wait() -> float:
    """TRACEGRAD_EXIT_WAIT: seconds (default 5) exit waits for a kernel build in flight."""
    value = os.environ.get("TRACEGRAD_EXIT_WAIT", "").strip()
    if not value:
        return 5.0
    try:
        return max(0.0, float(value))
    except ValueError:
        _warn("TRACEGRAD_EXIT_WAIT", value, "a number of seconds")
        return 5.0


def shape_generic_mode() -> str:
    """TRACEGRAD_SHAPE_GENERIC: "shapes" (default), "ahead" or "0": see codegen/shape_generic.py."""
    return _mode("TRACEGRAD_SHAPE_GENERIC", "shapes", ("ahead",))


def default_backend() -> str:
    """TRACEGRAD_BACKEND: "numba" (default) or "interpret"; read when a signature is built."""
    value = os.environ.get("TRACEGRAD_BACKEND", "").strip().lower()
    if value in ("", "numba"):
        return "numba"
    if value == "interpret":
        return "interpret"
    _warn("TRACEGRAD_BACKEND", value, "numba or interpret")
    return "numba"


def eager_numba() -> bool:
    return flag("TRACEGRAD_EAGER_NUMBA", True)


def malloc_tuning() -> bool:
    return flag("TRACEGRAD_MALLOC_TUNING", True)


def blas_follow_load() -> bool:
    return flag("TRACEGRAD_BLAS_FOLLOW_LOAD", True)


def numba_scipy_probe() -> bool:
    return flag("TRACEGRAD_NUMBA_SCIPY_PROBE", False)


def poison_freed() -> bool:
    return flag("TRACEGRAD_POISON_FREED", False)


def cache_dir_spec() -> str:
    return os.environ.get("TRACEGRAD_CACHE_DIR") or ""


def _positive_int(name: str) -> int | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        return max(1, int(value))
    except ValueError:
        _warn(name, value, "a positive integer")
        return None


def eager_threads() -> int | None:
    """TRACEGRAD_EAGER_THREADS as a positive int (None: unset, the thread limit applies)."""
    return _positive_int("TRACEGRAD_EAGER_THREADS")


def num_threads() -> int | None:
    """TRACEGRAD_NUM_THREADS as a positive int (None: unset); see runtime/threads.py."""
    return _positive_int("TRACEGRAD_NUM_THREADS")


def openblas_timeout() -> int | None:
    """TRACEGRAD_OPENBLAS_TIMEOUT: OpenBLAS's OPENBLAS_THREAD_TIMEOUT (log2 cycles,
    4..30; default 17), None for `default`."""
    value = os.environ.get("TRACEGRAD_OPENBLAS_TIMEOUT", "").strip().lower()
    if not value:
        return 17
    if value == "default":
        return None
    try:
        return min(30, max(4, int(value)))
    except ValueError:
        _warn("TRACEGRAD_OPENBLAS_TIMEOUT", value, "an integer from 4 to 30 or `default`")
        return 17


def omp_spincount() -> int | None:
    """TRACEGRAD_OMP_SPINCOUNT: spins as an int (default 1000), None for `default`."""
    value = os.environ.get("TRACEGRAD_OMP_SPINCOUNT", "").strip().lower()
    if not value:
        return 1000
    if value == "default":
        return None
    try:
        return max(0, int(value))
    except ValueError:
        _warn("TRACEGRAD_OMP_SPINCOUNT", value, "a count of spins or `default`")
        return 1000
