"""Plugin phases, PhaseInfo constructors and transitions: Flyte's names and values."""

from __future__ import annotations

import pytest

from sluice.plugins.core import (
    UNKNOWN_TRANSITION,
    ErrorKind,
    ExecutionError,
    Phase,
    PhaseInfo,
    TaskInfo,
    TaskLog,
    Transition,
    TransitionType,
)

FLYTE_PHASES = [
    ("UNDEFINED", 0),
    ("NOT_READY", 1),
    ("WAITING_FOR_RESOURCES", 2),
    ("QUEUED", 3),
    ("INITIALIZING", 4),
    ("RUNNING", 5),
    ("SUCCESS", 6),
    ("RETRYABLE_FAILURE", 7),
    ("PERMANENT_FAILURE", 8),
    ("WAITING_FOR_CACHE", 9),
    ("ABORTED", 10),
]


def test_phase_names_and_values_match_flyte() -> None:
    assert [(p.name, p.value) for p in Phase] == FLYTE_PHASES


@pytest.mark.parametrize("phase", list(Phase))
def test_phase_predicates(phase: Phase) -> None:
    failure = phase in (Phase.RETRYABLE_FAILURE, Phase.PERMANENT_FAILURE)
    assert phase.is_failure() is failure
    assert phase.is_success() is (phase is Phase.SUCCESS)
    assert phase.is_aborted() is (phase is Phase.ABORTED)
    assert phase.is_waiting_for_resources() is (phase is Phase.WAITING_FOR_RESOURCES)
    terminal = failure or phase in (Phase.SUCCESS, Phase.ABORTED)
    assert phase.is_terminal() is terminal


def test_terminal_phases() -> None:
    assert [p for p in Phase if p.is_terminal()] == [
        Phase.SUCCESS,
        Phase.RETRYABLE_FAILURE,
        Phase.PERMANENT_FAILURE,
        Phase.ABORTED,
    ]


@pytest.mark.parametrize(
    ("make", "phase"),
    [
        (PhaseInfo.not_ready, Phase.NOT_READY),
        (PhaseInfo.waiting_for_resources, Phase.WAITING_FOR_RESOURCES),
        (PhaseInfo.queued, Phase.QUEUED),
        (PhaseInfo.initializing, Phase.INITIALIZING),
        (PhaseInfo.running, Phase.RUNNING),
        (PhaseInfo.waiting_for_cache, Phase.WAITING_FOR_CACHE),
        (PhaseInfo.aborted, Phase.ABORTED),
    ],
)
def test_non_failure_constructors(make: object, phase: Phase) -> None:
    info = make(version=3, reason="because")  # type: ignore[operator]
    assert (info.phase, info.version, info.reason, info.error) == (phase, 3, "because", None)
    assert isinstance(info.info, TaskInfo)
    assert info.cleanup_on_failure is False


def test_constructors_keep_the_given_task_info() -> None:
    task_info = TaskInfo(logs=(TaskLog("ui", "https://x/1"),), external_id="job-1")
    assert PhaseInfo.running(1, "r", task_info).info is task_info
    assert PhaseInfo.queued(info=task_info).info is task_info
    assert PhaseInfo.success(task_info).info is task_info
    assert PhaseInfo.waiting_for_resources(info=task_info).info is task_info


def test_success_and_undefined() -> None:
    success = PhaseInfo.success(reason="done")
    assert (success.phase, success.version, success.reason, success.error) == (
        Phase.SUCCESS,
        0,
        "done",
        None,
    )
    undefined = PhaseInfo.undefined()
    assert (undefined.phase, undefined.info, undefined.error) == (Phase.UNDEFINED, None, None)


@pytest.mark.parametrize(
    ("make", "phase", "kind"),
    [
        (PhaseInfo.retryable_failure, Phase.RETRYABLE_FAILURE, ErrorKind.USER),
        (PhaseInfo.permanent_failure, Phase.PERMANENT_FAILURE, ErrorKind.USER),
        (PhaseInfo.system_retryable_failure, Phase.RETRYABLE_FAILURE, ErrorKind.SYSTEM),
        (PhaseInfo.system_permanent_failure, Phase.PERMANENT_FAILURE, ErrorKind.SYSTEM),
    ],
)
def test_failure_constructors_carry_the_error_kind(
    make: object, phase: Phase, kind: ErrorKind
) -> None:
    info = make("Boom", "it broke")  # type: ignore[operator]
    assert info.phase is phase
    assert info.error == ExecutionError("Boom", "it broke", kind)
    assert info.reason == "it broke"
    assert info.phase.is_failure()


def test_failure_with_explicit_kind_info_and_cleanup() -> None:
    task_info = TaskInfo(external_id="x")
    info = PhaseInfo.permanent_failure(
        "Quota", "over", ErrorKind.SYSTEM, info=task_info, cleanup=True
    )
    assert info.error is not None and info.error.kind is ErrorKind.SYSTEM
    assert info.info is task_info
    assert info.cleanup_on_failure is True


@pytest.mark.parametrize("make", [PhaseInfo.retryable_failure, PhaseInfo.permanent_failure])
def test_failure_without_code_and_message_gets_the_unknown_error(make: object) -> None:
    info = make("", "")  # type: ignore[operator]
    assert info.error == ExecutionError("Unknown", "Unknown error message", ErrorKind.USER)


def test_failure_with_only_a_code_or_a_message_keeps_it() -> None:
    assert PhaseInfo.retryable_failure("Code", "").error == ExecutionError("Code", "")
    assert PhaseInfo.retryable_failure("", "message").error == ExecutionError("", "message")


def test_with_version_and_with_reason_return_new_infos() -> None:
    original = PhaseInfo.running(1, "started")
    bumped = original.with_version(2)
    assert (bumped.version, bumped.reason, bumped.phase) == (2, "started", Phase.RUNNING)
    assert original.version == 1  # frozen: a copy
    assert original.with_reason("polling").reason == "started, polling"
    assert PhaseInfo.running().with_reason("first").reason == "first"
    with pytest.raises(AttributeError):
        original.version = 5  # type: ignore[misc]


def test_execution_error_json_round_trip() -> None:
    error = ExecutionError("Oops", "bad things", ErrorKind.SYSTEM)
    assert error.to_json() == {"code": "Oops", "message": "bad things", "kind": "SYSTEM"}
    assert ExecutionError.from_json(error.to_json()) == error
    assert ExecutionError.from_json({"code": "c", "message": "m"}).kind is ErrorKind.USER


def test_transitions() -> None:
    info = PhaseInfo.queued()
    assert Transition.to(info) == Transition(info, TransitionType.EPHEMERAL)
    assert UNKNOWN_TRANSITION.info.phase is Phase.UNDEFINED
    assert [(t.name, t.value) for t in TransitionType] == [("EPHEMERAL", 0), ("BARRIER", 1)]
