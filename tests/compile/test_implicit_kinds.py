"""An implicit input (a global or closure value) that changes kind is looked for again.

Found by the compiled-CNN example: lambdas written at one line share one compiled
function (tg.grad made inside a loop), and a global that was an int and became a
tuple was passed into the graph as an i64 array.
"""

import numpy as np

import tracegrad as tg

INTERP = dict(backend="interpret")
SHAPE = 2


def test_a_global_rebound_from_int_to_tuple_is_static_again():
    global SHAPE
    x = np.arange(4.0)
    results = []
    for SHAPE in (4, (2, 2), (4, 1)):
        results.append(tg.compile(lambda x: tg.reshape(x, SHAPE) * 2.0, **INTERP)(x))  # noqa: B023 - the point: the rebound global is read
    assert [r.shape for r in results] == [(4,), (2, 2), (4, 1)]
    np.testing.assert_array_equal(results[1], (x * 2).reshape(2, 2))


def test_a_closure_rebound_from_array_to_list_of_floats():
    def make():
        w = np.array([1.0, 2.0])
        f = tg.grad(lambda x: tg.sum(x * w[1]), **INTERP)
        first = f(np.ones(2))
        w = [3.0, 5.0]  # the closure cell now holds a list: a static value
        return first, f(np.ones(2))

    first, second = make()
    np.testing.assert_array_equal(first, [2.0, 2.0])
    np.testing.assert_array_equal(second, [5.0, 5.0])


def test_stride_rebound_in_a_loop_gives_each_strides_gradient():
    x = np.random.default_rng(0).standard_normal((1, 1, 5, 5))
    w = np.ones((1, 1, 2, 2))
    for s, windows in ((1, 16), ((2, 1), 8)):
        g = tg.grad(lambda x: tg.sum(tg.conv2d(x, w, stride=s)), **INTERP)(x)  # noqa: B023 - grad runs it in this iteration
        assert g.sum() == 4.0 * windows


MODE = "square"
OPTION = None


def _loss(x):
    y = x * x if MODE == "square" else x
    if OPTION is not None:
        y = y * OPTION
    return tg.sum(y)


def test_a_global_string_or_none_is_read_on_every_call_not_frozen():
    # (a str and None were frozen at the first trace: a silently stale result)
    global MODE, OPTION
    f = tg.value_and_grad(_loss, **INTERP)
    x = np.array([1.0, 2.0, 3.0])
    try:
        value, g = f(x)
        assert value == 14.0 and np.array_equal(g, 2 * x)
        MODE = "identity"
        value, g = f(x)
        assert value == 6.0 and np.array_equal(g, np.ones(3))
        OPTION = 3.0
        value, g = f(x)
        assert value == 18.0 and np.array_equal(g, np.full(3, 3.0))
        OPTION, MODE = None, "square"
        assert f(x)[0] == 14.0
    finally:
        MODE, OPTION = "square", None
