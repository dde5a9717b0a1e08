"""core.errors.check_one_of: the one "must be one of" check of closed name sets."""

from __future__ import annotations

import pytest

from radspatial.core.errors import check_one_of
from radspatial.core.rules import QuestionRules
from radspatial.imaging.slices import Variant


def test_a_name_in_the_set_passes_and_one_outside_is_named():
    check_one_of("b", ("a", "b"), "--x")
    with pytest.raises(ValueError, match=r"^--x must be one of a, b, got 'c'$"):
        check_one_of("c", ("a", "b"), "--x")


def test_rule_profiles_and_variants_are_checked_with_it():
    with pytest.raises(ValueError, match=r"--rules must be one of mirp, strict, got 'paper'"):
        QuestionRules(profile="paper")
    with pytest.raises(ValueError, match=r"rotation/flip variant must be one of A1, .*got 'C1'"):
        Variant("C1")
    assert Variant("A1").flip and not QuestionRules(profile="strict").mirp
