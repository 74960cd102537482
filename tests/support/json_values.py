"""Hypothesis strategies of JSON values with an RFC 8785 form (integers within 2**53, finite floats)."""

from __future__ import annotations

from hypothesis import strategies as st

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5), max_leaves=40
)
