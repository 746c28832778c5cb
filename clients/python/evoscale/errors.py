"""Exceptions: every gRPC error from evoscaled becomes an EvoscaleError subclass.

str(error) is the server's message (which names the field or the study), and `error.code` is
the grpc.StatusCode, so callers can catch a specific class or test the code.
"""

from __future__ import annotations

import grpc


class EvoscaleError(Exception):
    """Base class of the errors the client raises. `code` is a grpc.StatusCode."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class CancelledError(EvoscaleError):
    code = grpc.StatusCode.CANCELLED


class UnknownError(EvoscaleError):
    code = grpc.StatusCode.UNKNOWN


class InvalidArgumentError(EvoscaleError, ValueError):
    """Bad input: the message names the field, e.g. `parameter "lr": min 0.1 > max 0.01`."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class DeadlineExceededError(EvoscaleError):
    code = grpc.StatusCode.DEADLINE_EXCEEDED


class NotFoundError(EvoscaleError, LookupError):
    """An unknown (or deleted) study or trial."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(EvoscaleError):
    """E.g. CreateStudy with a display name in use by a study of another spec."""

    code = grpc.StatusCode.ALREADY_EXISTS


class DuplicatedStudyError(AlreadyExistsError):
    """create_study(..., load_if_exists=False) found a study of that display name."""


class PermissionDeniedError(EvoscaleError):
    code = grpc.StatusCode.PERMISSION_DENIED


class ResourceExhaustedError(EvoscaleError):
    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPreconditionError(EvoscaleError):
    """The study or trial is in the wrong state, e.g. completing a trial twice."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class AbortedError(EvoscaleError):
    code = grpc.StatusCode.ABORTED


class OutOfRangeError(EvoscaleError):
    code = grpc.StatusCode.OUT_OF_RANGE


class UnimplementedError(EvoscaleError):
    """The server does not know the RPC (an evoscaled older than this client)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class InternalError(EvoscaleError):
    code = grpc.StatusCode.INTERNAL


class UnavailableError(EvoscaleError):
    """The server cannot be reached (not running, wrong address, TLS mismatch)."""

    code = grpc.StatusCode.UNAVAILABLE


class DataLossError(EvoscaleError):
    code = grpc.StatusCode.DATA_LOSS


class UnauthenticatedError(EvoscaleError):
    """A missing or unknown token (evoscaled runs with --auth-tokens)."""

    code = grpc.StatusCode.UNAUTHENTICATED


_BY_CODE: dict[grpc.StatusCode, type[EvoscaleError]] = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def from_rpc_error(error: grpc.RpcError) -> EvoscaleError:
    """The EvoscaleError subclass for a failed call, carrying the server's message."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else None
    message = details or (code.name if code is not None else str(error))
    cls = _BY_CODE.get(code, EvoscaleError)
    return cls(message, code)
