"""Fields called directly (eagerly) check their input and parameters: a NaN or zero row, a
non-boolean ``causal``, complex Q, K, V and an overflowing kernel raise a clear error instead of
returning NaN or dropping an imaginary part."""

import jax.numpy as jnp
import jax.random as jr
import pytest

import attnflow as af

X = af.random_tokens(jr.key(0), 4, 3)
FIELD = af.SelfAttention(1.0)
FIELDS = [FIELD, af.MultiHeadAttention.from_heads([FIELD, af.SelfAttention(2.0)])]


@pytest.mark.parametrize("field", FIELDS)
def test_nan_row_raises(field):
    with pytest.raises(ValueError, match=r"x: tokens contain NaN or inf \(first at row 1"):
        field(0.0, X.at[1, 0].set(jnp.nan), None)


@pytest.mark.parametrize("field", FIELDS)
def test_zero_row_raises(field):
    with pytest.raises(ValueError, match=r"x: row 1 is zero"):
        field(0.0, X.at[1].set(0.0), None)


def test_causal_must_be_a_boolean():
    with pytest.raises(ValueError, match=r"causal: expected True or False, got 'no'"):
        af.SelfAttention(1.0, causal="no")


@pytest.mark.parametrize("name", ["Q", "K", "V"])
def test_complex_matrices_are_rejected(name):
    with pytest.raises(
        ValueError, match=rf"{name}: expected a real floating-point matrix, got dtype complex"
    ):
        af.SelfAttention(1.0, **{name: jnp.eye(3, dtype=complex) * (1 + 1j)})


@pytest.mark.parametrize(
    "beta, dtype, name", [(100.0, jnp.float32, "float32"), (800.0, jnp.float64, "float64")]
)
def test_usa_overflow_names_the_cause(beta, dtype, name):
    usa = af.SelfAttention(beta, normalization="n")
    with pytest.raises(
        ValueError, match=rf"the attention output is not finite.*overflows {name}.*use float64"
    ):
        usa(0.0, X.astype(dtype), None)
