"""Python client of evoscaled, the hyperparameter study service (Vizier's ask/tell over gRPC).

    import evoscale
    client = evoscale.Client("127.0.0.1:50051")
    spec = {"metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "parameters": [{"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1},
                            "scale": "LOG"}],
            "max_trials": 20}
    study = client.create_study("ctr", spec)  # get-or-create by display name
    while trials := study.ask():
        for trial in trials:
            study.tell(trial, train(**trial.params))
    print(study.best_trials)

The Optuna bridge is evoscale.integration.optuna.EvoscaleSampler.
"""

from evoscale.client import Client, Measurement, Study, Trial, default_client_id
from evoscale.errors import (
    AbortedError,
    AlreadyExistsError,
    CancelledError,
    DataLossError,
    DeadlineExceededError,
    DuplicatedStudyError,
    EvoscaleError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
)
from evoscale.spec import load_study_file, study_from_spec

__version__ = "0.1.0"

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "CancelledError",
    "Client",
    "DataLossError",
    "DeadlineExceededError",
    "DuplicatedStudyError",
    "EvoscaleError",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "Measurement",
    "NotFoundError",
    "OutOfRangeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "Study",
    "Trial",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "UnknownError",
    "default_client_id",
    "load_study_file",
    "study_from_spec",
]
