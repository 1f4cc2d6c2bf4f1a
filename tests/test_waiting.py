"""tests/support/waiting.py's `eventually`: what it returns, what counts as "not yet", how it
fails."""

import itertools

import pytest

from tests.support.waiting import eventually


def test_it_returns_the_first_truthy_value():
    answers = iter([None, 0, [], "ready"])
    assert eventually(lambda: next(answers), timeout=10, interval=0) == "ready"


def test_an_assertion_in_the_check_means_not_yet():
    calls = itertools.count(1)

    def check():
        n = next(calls)
        assert n >= 3, f"only {n}"
        return n

    assert eventually(check, timeout=10, interval=0) == 3


def test_on_timeout_it_fails_with_the_message_and_the_last_value():
    with pytest.raises(AssertionError) as failed:
        eventually(lambda: [], timeout=0, message="the list stayed empty")
    assert str(failed.value).startswith("the list stayed empty (not within 0 s; last: [])")


def test_on_timeout_the_last_assertion_is_shown_and_chained():
    def check():
        raise AssertionError("state is pending")

    with pytest.raises(AssertionError) as failed:
        eventually(check, timeout=0, message=lambda: "asked at the deadline")
    assert "asked at the deadline" in str(failed.value)
    assert "state is pending" in str(failed.value)
    assert isinstance(failed.value.__cause__, AssertionError)


def test_only_the_exceptions_it_is_told_to_ignore_are_retried():
    errors = iter([LookupError("not there yet")])

    def check():
        for error in errors:
            raise error
        return "there"

    assert eventually(check, timeout=10, interval=0, ignoring=(LookupError,)) == "there"
    with pytest.raises(ZeroDivisionError):
        eventually(lambda: 1 / 0, timeout=10, interval=0)
