"""One argument order across attnflow.theory (issue 43, item 3; docs/conventions.md, "Argument
order"): the variables a closed form is evaluated at come first, the model's parameters (β, n, d,
γ) are keyword-only. Today's positional calls keep their answer for one release, with a
DeprecationWarning that spells the new call; a call that mixes the two orders is refused."""

import warnings

import pytest

import attnflow.theory as th

# (function, the old positional call, the same call in the new order, a mixed call)
CASES = [
    (
        "equiangular_time",
        (0.5, 16, 0.9),
        ((0.9,), dict(beta=0.5, n=16)),
        ((0.9, 16), {"beta": 0.5}),
    ),
    (
        "equiangular_inner_product",
        (1.0, 4, 2.0, 0.3),
        ((1.0, 0.3), dict(beta=2.0, n=4)),
        ((1.0, 0.3, 2.0), {"n": 4}),
    ),
    (
        "equiangular_asymptotics",
        (1.0, 8, 0.2),
        ((0.2,), dict(beta=1.0, n=8)),
        ((1.0, 8), {"beta": 1.0}),
    ),
    (
        "equiangular_attention_weights",
        (0.5, 10, 2.0),
        ((0.5,), dict(beta=2.0, n=10)),
        ((0.5, 10), {"n": 10}),
    ),
    (
        "pre_ln_equiangular_map",
        (0.5, 10, 2.0),
        ((0.5,), dict(beta=2.0, n=10)),
        ((0.5, 10), {"n": 10}),
    ),
    (
        "pre_ln_equiangular_layers",
        (0.3, 10, 2.0, 3),
        ((0.3, 3), dict(beta=2.0, n=10)),
        ((0.3, 3, 2.0), {"n": 10}),
    ),
    ("long_context_limit", (0.5, 3.0), ((0.5,), dict(gamma=3.0)), ((0.5, 3.0), {"gamma": 3.0})),
    (
        "stationary_order_parameter",
        (4.0, 0.0, 3),
        ((4.0,), dict(beta=0.0, d=3)),
        ((4.0, 0.0), {"beta": 0.0}),
    ),
    (
        "orthogonal_inner_product",
        (1.0, 8, 2.0),
        ((1.0,), dict(beta=2.0, n=8)),
        ((1.0, 8), {"n": 8}),
    ),
    ("orthogonal_inner_product_beta0", (0.7, 3), ((0.7,), dict(n=3)), ((0.7, 3), {"n": 3})),
    (
        "cone_collapse_bound",
        (2.0, 1.0, 8),
        ((2.0,), dict(beta=1.0, n=8)),
        ((2.0, 1.0), {"beta": 1.0}),
    ),
    ("hessian_kernel", (0.5, 2.0, 3), ((0.5,), dict(beta=2.0, d=3)), ((0.5, 2.0), {"beta": 2.0})),
    (
        "homogenized_pair_coefficients",
        (0.3, 1.0, 4),
        ((0.3,), dict(beta=1.0, d=4)),
        ((0.3, 1.0), {"d": 4, "beta": 1.0}),
    ),
]


def _leaves(value):
    if hasattr(value, "__dataclass_fields__"):
        return [float(v) if v.ndim == 0 else v.tolist() for v in vars(value).values()]
    if isinstance(value, tuple):
        return [float(v) for v in value]
    return [float(value)]


@pytest.mark.parametrize("name, old, new, mixed", CASES, ids=[c[0] for c in CASES])
def test_old_positional_call_warns_and_keeps_its_answer(name, old, new, mixed):
    function = getattr(th, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        fresh = function(*new[0], **new[1])  # the new call: no warning
    with pytest.warns(DeprecationWarning, match=rf"{name}: positional arguments in the old order"):
        legacy = function(*old)
    assert _leaves(legacy) == _leaves(fresh)
    with pytest.raises(TypeError, match=rf"{name}: the model's parameters are keyword-only"):
        function(*mixed[0], **mixed[1])


def test_the_old_call_of_the_issue_gives_its_old_answer_and_the_new_call_says_what_it_means():
    # equiangular_time(0.5, 16, 0.9) meant β = 0.5, n = 16, ρ₀ = 0.9 (2.353), not ρ₀ = 0.5, β = 0.9
    with pytest.warns(DeprecationWarning, match=r"equiangular_time\(0.9, beta=0.5, n=16\)"):
        old = float(th.equiangular_time(0.5, 16, 0.9))
    assert old == float(th.equiangular_time(0.9, beta=0.5, n=16))
    assert old != float(th.equiangular_time(0.5, beta=0.9, n=16))
    assert abs(old - 2.3529825) < 1e-6
