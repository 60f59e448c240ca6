"""require_positive: every non-positive or non-integer size refused in one line naming it."""

import pytest

from infralens.tools.checks import require_positive


def test_positive_integers_pass():
    require_positive()
    require_positive(batch=1, seq_len=2**40)


@pytest.mark.parametrize("value", [0, -1, 1.0, 2.5, "8", None, True, False, [4]])
def test_anything_else_is_refused_by_name(value):
    with pytest.raises(ValueError) as info:
        require_positive(batch=value)
    assert str(info.value) == f"batch must be a positive integer, got {value!r}"


def test_the_first_bad_argument_is_named():
    with pytest.raises(ValueError, match="^seq_len must"):
        require_positive(batch=2, seq_len=0, heads=-1)


def test_int_subclasses_other_than_bool_are_sizes():
    class Size(int):
        pass

    require_positive(n=Size(3))
    with pytest.raises(ValueError, match="got True"):
        require_positive(n=True)  # bool is an int subclass too, but True is not a size
