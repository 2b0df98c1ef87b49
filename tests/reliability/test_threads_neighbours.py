"""tracegrad as a good neighbour (issue 23), each check in a fresh process: importing
and using tracegrad changes no other library's environment variable, thread count or
BLAS setting; Numba's threads sleep once a kernel returns; the thread limit reaches
compiled kernels. What is measured here is CPU time and thread counts, never wall time."""

import os

import pytest

from tracegrad.runtime import threads

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="Linux /proc only")

# a parallel kernel: 2**20 elements is above codegen's prange threshold (2**18)
PRELUDE = r"""
import os, sys, time
try:
    from threadpoolctl import threadpool_info  # (it sets KMP_DUPLICATE_LIB_OK itself)
except ImportError:
    threadpool_info = lambda: []
ENV_BEFORE = dict(os.environ)
import numpy as np
import tracegrad as tg
import tracegrad.eager as torch
from tracegrad.ops import blas_threads, parallel
from tracegrad.runtime import threads

def f(x, w):
    return tg.sum(tg.tanh(x * w) ** 2)

x = np.linspace(-2, 2, 1 << 20).astype(np.float32)
w = np.full_like(x, 0.5)
vg = tg.value_and_grad(f, argnums=1)
value, grad = vg(x, w)
kernel = vg.lower(x, w).kernel
assert kernel.parallel_source is not None, "no parallel variant was built"

def burnt_after(fn, idle=0.03, reps=7):
    out = []
    for _ in range(reps):
        fn()
        c0 = time.process_time()
        time.sleep(idle)
        out.append(time.process_time() - c0)
    return sorted(out)[len(out) // 2] * 1e3
"""
ENV = {"TRACEGRAD_PARALLEL": "sync", "TRACEGRAD_BACKEND": "numba"}
UNSET = (
    "OMP_WAIT_POLICY",
    "GOMP_SPINCOUNT",
    "TRACEGRAD_OMP_SPINCOUNT",
    "TRACEGRAD_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_THREAD_TIMEOUT",
    "TRACEGRAD_OPENBLAS_TIMEOUT",
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One kernel cache for this file's children: the kernel compiles once."""
    return str(tmp_path_factory.mktemp("threads-cache"))


multi_core = pytest.mark.skipif(threads.available_cpus() < 2, reason="needs 2 CPUs")


def test_using_tracegrad_changes_no_environment_variable_and_no_thread_setting(run_script, cache):
    run_script(
        PRELUDE
        + r"""
import numba
numba_before = numba.get_num_threads()
blas_before = blas_threads.library_threads()
pools_before = [(p["filepath"], p["num_threads"]) for p in threadpool_info()]
parallel.threads_now = lambda: 1          # as on a busy machine: BLAS gets lowered for a call
blas_threads._ceiling[0] = max(blas_threads._ceiling[0], 2)
a = np.random.default_rng(0).standard_normal((200, 200))
for _ in range(3):
    vg(x, w)
    (torch.tensor(a) @ torch.tensor(a)).sum()
    tg.compile(lambda a: tg.tanh(a @ a))(a)
    torch.tensor(x).tanh().sum()
assert dict(os.environ) == ENV_BEFORE, set(os.environ.items()) ^ set(ENV_BEFORE.items())
assert numba.get_num_threads() == numba_before
assert blas_threads.library_threads() == blas_before
assert [(p["filepath"], p["num_threads"]) for p in threadpool_info()] == pools_before
print("OK")
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )


@multi_core
def test_numba_threads_sleep_once_a_kernel_returns(run_script, cache):
    """libgomp's default spin burnt ~11 ms of CPU per worker after each kernel here
    (perf/threads.md); tracegrad's launch cuts it to ~0.1 ms."""
    out = run_script(
        PRELUDE
        + r"""
parallel.threads_now = threads.get_num_threads  # use the parallel variant whatever the load
report = threads.omp_report()
assert report["spin"] == 1000 and report["layer"] == "omp", report
assert "GOMP_SPINCOUNT" not in os.environ
burnt = burnt_after(lambda: vg(x, w))
assert burnt < 3.0, f"{burnt:.2f} ms of CPU in the 30 ms after a kernel returned"
print("OK", burnt)
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )
    assert float(out.split()[-1]) < 3.0


# tracegrad imported before NumPy: OpenBLAS loads with tracegrad's wait policy
BLAS_PRELUDE = r"""
import os, sys, time
ENV_BEFORE = dict(os.environ)
import tracegrad as tg
import numpy as np
from tracegrad.ops import parallel
from tracegrad.runtime import threads

def burnt_after(fn, idle=0.03, reps=7):
    out = []
    for _ in range(reps):
        fn()
        c0 = time.process_time()
        time.sleep(idle)
        out.append(time.process_time() - c0)
    return sorted(out)[len(out) // 2] * 1e3

parallel.threads_now = threads.get_num_threads  # BLAS on every thread whatever the load
a = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
matmul = tg.compile(lambda a, b: tg.tanh(a @ b))
np.testing.assert_allclose(matmul(a, a), np.tanh(a.astype(float) @ a), rtol=1e-4, atol=5e-4)
assert dict(os.environ) == ENV_BEFORE, set(os.environ.items()) ^ set(ENV_BEFORE.items())
"""


@multi_core
def test_openblas_threads_sleep_once_a_gemm_kernel_returns(run_script, cache):
    """OpenBLAS's own timeout (2**28 cycles) burnt 12-30 ms of CPU in the 30 ms after
    one 512x512 GEMM here (perf/threads.md); imported by tracegrad it is 2**17."""
    out = run_script(
        BLAS_PRELUDE
        + r"""
assert threads.blas_report()["timeout"] == 17, threads.blas_report()
burnt = max(burnt_after(lambda: matmul(a, a)), burnt_after(lambda: a @ a))
assert burnt < 3.0, f"{burnt:.2f} ms of CPU in the 30 ms after a GEMM returned"
print("OK", burnt)
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )
    assert float(out.split()[-1]) < 3.0


@pytest.mark.parametrize(
    "setting, why",
    [
        ({"OPENBLAS_THREAD_TIMEOUT": "28"}, "the user set OPENBLAS_THREAD_TIMEOUT"),
        ({"TRACEGRAD_OPENBLAS_TIMEOUT": "default"}, "TRACEGRAD_OPENBLAS_TIMEOUT=default"),
    ],
)
def test_openblas_wait_policy_left_alone_when_asked(run_script, cache, setting, why):
    run_script(
        BLAS_PRELUDE
        + f"""
assert threads.blas_report() == {{"timeout": None, "why": {why!r}}}, threads.blas_report()
print("OK")
""",
        unset=tuple(v for v in UNSET if v not in setting),
        cache_dir=cache,
        **setting,
        **ENV,
    )


def test_openblas_wait_policy_stays_when_numpy_came_first(run_script, cache):
    run_script(
        PRELUDE
        + r"""
assert threads.blas_report()["timeout"] is None, threads.blas_report()
assert "NumPy was imported before tracegrad" in threads.blas_report()["why"]
print("OK")
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )


def test_the_users_openmp_wait_policy_is_left_alone(run_script, cache):
    run_script(
        PRELUDE
        + r"""
assert threads.omp_report()["spin"] is None, threads.omp_report()
assert "OMP_WAIT_POLICY" in threads.omp_report()["why"]
assert os.environ["OMP_WAIT_POLICY"] == "active" and "GOMP_SPINCOUNT" not in os.environ
print("OK")
""",
        unset=tuple(v for v in UNSET if v != "OMP_WAIT_POLICY"),
        OMP_WAIT_POLICY="active",
        cache_dir=cache,
        **ENV,
    )


def test_default_leaves_libgomp_alone(run_script, cache):
    run_script(
        PRELUDE
        + r"""
assert threads.omp_report()["spin"] is None and "default" in threads.omp_report()["why"]
print("OK")
""",
        unset=tuple(v for v in UNSET if v != "TRACEGRAD_OMP_SPINCOUNT"),
        TRACEGRAD_OMP_SPINCOUNT="default",
        cache_dir=cache,
        **ENV,
    )


@multi_core
def test_the_limit_reaches_compiled_kernels_and_numbas_count_is_put_back(run_script, cache):
    run_script(
        PRELUDE
        + r"""
import numba
from numba.np.ufunc import parallel as npar
parallel.threads_now = threads.get_num_threads
seen = []
def entry(*a):
    seen.append(("parallel", numba.get_num_threads()))
    return "p"
def serial(*a):
    seen.append(("serial", numba.get_num_threads()))
    return "s"
call = threads.numba_parallel_call(entry, serial, idle=lambda: parallel.threads_now())
numba.set_num_threads(1)            # the caller's own Numba setting
tg.set_num_threads(2)
assert call() == "p" and seen[-1] == ("parallel", 2), seen
assert numba.get_num_threads() == 1  # put back
tg.set_num_threads(1)
assert call() == "s" and seen[-1][0] == "serial"
# small work stays on one thread: one thread per KERNEL_GRAIN elements of its largest loop
tg.set_num_threads(2)
small = threads.numba_parallel_call(entry, serial, work=threads.KERNEL_GRAIN)
assert small() == "s" and seen[-1][0] == "serial"
big = threads.numba_parallel_call(entry, serial, work=2 * threads.KERNEL_GRAIN)
assert big() == "p" and seen[-1] == ("parallel", 2)
# a real kernel gives the same values on one thread and on two
tg.set_num_threads(2)
v2, g2 = vg(x, w)
tg.set_num_threads(1)
v1, g1 = vg(x, w)
np.testing.assert_allclose(v1, v2, rtol=1e-5)
np.testing.assert_allclose(g1, g2, rtol=1e-6)
assert numba.get_num_threads() == 1
print("OK")
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )


def test_a_kernel_in_another_thread_does_not_change_the_callers_numba_count(run_script, cache):
    run_script(
        PRELUDE
        + r"""
import threading, numba
parallel.threads_now = threads.get_num_threads
before = numba.get_num_threads()
errors = []
def work():
    try:
        for _ in range(5):
            vg(x, w)
    except Exception as exc:
        errors.append(exc)
ts = [threading.Thread(target=work) for _ in range(3)]
[t.start() for t in ts]
vg(x, w)
[t.join() for t in ts]
assert not errors, errors
assert numba.get_num_threads() == before
print("OK")
""",
        unset=UNSET,
        cache_dir=cache,
        **ENV,
    )
