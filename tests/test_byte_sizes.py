"""Byte counts as the learning and private-calibration tables print them (abm.byte_sizes)."""

from __future__ import annotations

import pytest

from abm.byte_sizes import size_text


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (999, "999 B"),
        (1_000, "1.0 kB"),
        (4_999, "5.0 kB"),  # read 0.00 in MB
        (999_949, "999.9 kB"),
        (999_950, "1.00 MB"),  # 999.95 kB rounds to 1000.0: the next unit
        (2_000_000, "2.00 MB"),
        (1_234_567_890, "1.23 GB"),
    ],
)
def test_a_size_is_given_in_the_unit_that_shows_it(count, text):
    assert size_text(count) == text
