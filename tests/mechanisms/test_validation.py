"""Validation at the public boundary: one message template, typed errors, no data in messages."""

from __future__ import annotations

import numpy as np
import pytest

from mechanisms import DomainError, DPStreamError, ParameterError
from mechanisms.core._validation import check_integer, check_probability, check_stream


def test_errors_are_typed_and_share_one_root():
    assert issubclass(ParameterError, DPStreamError) and issubclass(ParameterError, ValueError)
    assert issubclass(DomainError, DPStreamError) and issubclass(DomainError, ValueError)


def test_parameter_message_follows_the_template():
    with pytest.raises(ParameterError) as info:
        check_probability(1.5, "delta", "plan_pak")
    assert str(info.value).startswith(
        "The 'delta' parameter of plan_pak must be a float in [0, 1). Got 1.5 instead."
    )


def test_integer_check_rejects_bools_and_floats():
    for bad in (True, 2.0, "3", 0):
        with pytest.raises(ParameterError):
            check_integer(bad, "w", "f")
    assert check_integer(np.int64(4), "w", "f") == 4


@pytest.mark.parametrize(
    ("values", "rule"),
    [
        ([1.0, np.nan], "finite"),
        ([1.0, np.inf], "finite"),
        ([1.0, -0.5], "lie in"),
        ([1.0, 12.0], "lie in"),
        ([], "at least 1"),
        ([[1.0, 2.0]], "one-dimensional"),
    ],
)
def test_stream_checks_name_the_rule_but_never_the_values(values, rule):
    with pytest.raises(DomainError, match=rule) as info:
        check_stream(values, "values", "f", bound=10.0)
    assert "12" not in str(info.value).replace("[0, 10]", "")
    assert "-0.5" not in str(info.value)


def test_checked_stream_is_a_read_only_copy():
    src = np.array([1.0, 2.0])
    out = check_stream(src, "values", "f", bound=10.0)
    src[0] = 5.0
    assert out[0] == 1.0 and not out.flags.writeable


def test_check_stream_without_copy_reads_a_float64_array_in_place():
    import numpy as np

    from mechanisms.core._validation import check_stream

    xs = np.array([1.0, 2.0, 3.0])
    same = check_stream(xs, "values", "f", bound=5.0, copy=False)
    assert same is xs and xs.flags.writeable  # the caller's array, flags untouched
    ints = np.array([1, 2, 3])
    assert check_stream(ints, "values", "f", copy=False).dtype == np.float64  # converted
    copied = check_stream(xs, "values", "f")
    assert copied is not xs and not copied.flags.writeable
