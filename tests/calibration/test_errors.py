"""CalibrationError carries its location; the message is rendered from it, never parsed."""

from __future__ import annotations

import pytest

from app.calibration import CalibrationError, ParamError, StateError


@pytest.mark.parametrize(
    ("loc", "message"),
    [
        ((), "must be 0 or 1"),
        (("labels",), "labels: must be 0 or 1"),
        (("labels", 3), "labels[3]: must be 0 or 1"),
        (("scores", 17, 2), "scores[17][2]: must be 0 or 1"),
        (("params", "targets"), "params.targets: must be 0 or 1"),
    ],
)
def test_the_message_renders_the_location(loc: tuple[str | int, ...], message: str) -> None:
    error = CalibrationError("must be 0 or 1", loc=loc)
    assert (error.loc, error.reason, str(error)) == (loc, "must be 0 or 1", message)


def test_a_reason_that_reads_like_a_location_is_not_parsed() -> None:
    error = CalibrationError("labels: must be 0 or 1")
    assert (error.loc, error.reason) == ((), "labels: must be 0 or 1")


def test_param_errors_are_located_under_params() -> None:
    error = ParamError("targets", "unknown parameter")
    assert (error.field, error.loc, str(error)) == (
        "targets",
        ("params", "targets"),
        "params.targets: unknown parameter",
    )
    listed = ParamError("candidates", "unknown 'svm'", index=1)
    assert (listed.field, listed.loc) == ("candidates", ("params", "candidates", 1))
    assert str(listed) == "params.candidates[1]: unknown 'svm'"
    assert isinstance(StateError("state.T: must be positive"), CalibrationError)
