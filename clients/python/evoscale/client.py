"""The evoscaled client: Client (a connection), Study and Trial (views over the protos).

Every call is one RPC on evoscale.v1.StudyService; every gRPC error becomes an EvoscaleError
subclass (evoscale.errors) whose str() is the server's message. A Client is safe to share
between threads (gRPC channels are); Study and Trial objects hold a snapshot of what the server
answered last plus a reference to their Client, and are cheap to make.

Many worker processes can share one study: each makes its own Client (a process-unique
client_id by default), calls create_study(name, spec) (get-or-create by display name), then
ask/tell until ask returns no trial.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import numbers
import os
import secrets
import socket
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Union

import grpc

from evoscale.errors import DuplicatedStudyError, from_rpc_error
from evoscale.spec import SpecLike, study_from_spec
from evoscale.v1 import study_pb2, study_pb2_grpc

if TYPE_CHECKING:  # pandas is optional
    import pandas

ParamValue = Union[float, int, str]
Metrics = Union[float, int, Mapping[str, float]]

_PAGE_SIZE = 1000  # the largest page ListTrials and ListStudies give


def default_client_id() -> str:
    """A client id unique to this process: py-HOST-PID-RANDOM."""
    host = socket.gethostname()[:64] or "host"
    return f"py-{host}-{os.getpid()}-{secrets.token_hex(4)}"


class _MetadataMethods:
    """set_metadata and delete_metadata, over the update_metadata of Study and Trial."""

    def update_metadata(
        self, set: Mapping[str, str] | None = None, remove: Iterable[str] = ()
    ) -> dict[str, str]:
        raise NotImplementedError

    def set_metadata(self, **values: str) -> dict[str, str]:
        """Sets metadata keys; returns the metadata afterwards."""
        return self.update_metadata(set=values)

    def delete_metadata(self, *keys: str) -> dict[str, str]:
        """Removes metadata keys (absent keys are no error); returns the metadata afterwards."""
        return self.update_metadata(remove=keys)


# Several replicas: the first that answers, the next when it goes, and a call that failed
# UNAVAILABLE (its replica died under it) tried again there.
_REPLICAS_SERVICE_CONFIG = json.dumps(
    {
        "loadBalancingConfig": [{"pick_first": {}}],
        "methodConfig": [
            {
                "name": [{"service": "evoscale.v1.StudyService"}],
                "retryPolicy": {
                    "maxAttempts": 5,
                    "initialBackoff": "0.2s",
                    "maxBackoff": "2s",
                    "backoffMultiplier": 2,
                    "retryableStatusCodes": ["UNAVAILABLE"],
                },
            }
        ],
    }
)


def _channel_target(address: str | Sequence[str]) -> tuple[str, list[tuple[str, Any]]]:
    """gRPC's target and channel options for one address or a list of replicas (IP:PORT)."""
    parts = [address] if isinstance(address, str) else list(address)
    parts = [p.strip() for part in parts for p in part.split(",") if p.strip()]
    if len(parts) == 1:
        return parts[0], []
    if not parts:
        raise ValueError("address: empty")
    hosts = []
    for part in parts:
        if part.startswith("localhost:"):
            part = "127.0.0.1" + part[len("localhost"):]
        host = part.rpartition(":")[0]
        try:
            ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            raise ValueError(
                f"address: {part!r} in a list of replicas must be IP:PORT (or localhost:PORT)"
            ) from None
        hosts.append(part)
    scheme = "ipv6:" if hosts[0].startswith("[") else "ipv4:"
    return scheme + ",".join(hosts), [("grpc.service_config", _REPLICAS_SERVICE_CONFIG)]


class Client:
    """A connection to evoscaled.

    Args:
        address: host:port of evoscaled's gRPC listener; or several replicas (evoscaled on one
            PostgreSQL) as a list or a comma-separated string of IP:PORT: the client keeps to the
            first live one and moves to the next when it goes, trying a call that failed
            UNAVAILABLE again there.
        token: sent as `authorization: Bearer TOKEN` on every call (evoscaled --auth-tokens).
        tls_ca: path to a PEM CA certificate; the channel is TLS when given, else plaintext.
        client_id: names this worker to SuggestTrials (a client that asks again while it holds
            ACTIVE trials gets those back first). Default: unique per process.
        timeout: seconds each call may take (None: no deadline).
    """

    def __init__(
        self,
        address: str | Sequence[str] = "127.0.0.1:50051",
        token: str | None = None,
        tls_ca: str | os.PathLike[str] | None = None,
        client_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> None:
        target, options = _channel_target(address)
        self.address = address if isinstance(address, str) else ",".join(address)
        self.client_id = client_id or default_client_id()
        self.timeout = timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        if tls_ca is not None:
            with open(tls_ca, "rb") as f:
                credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            self._channel = grpc.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = study_pb2_grpc.StudyServiceStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Client(address={self.address!r}, client_id={self.client_id!r})"

    def call(self, rpc: str, request: Any) -> Any:
        """Calls StudyService.`rpc`; a failure raises the matching EvoscaleError."""
        method: Callable[..., Any] = getattr(self._stub, rpc)
        try:
            return method(request, timeout=self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e) from None

    # ---- Studies ---------------------------------------------------------------------------

    def create_study(
        self,
        display_name: str,
        spec: SpecLike,
        load_if_exists: bool = True,
        metadata: Mapping[str, str] | None = None,
    ) -> Study:
        """Gets or creates the study named `display_name`.

        `spec` is a dict in the CLI's study-file format, a path to such a YAML or JSON file, or
        a StudySpec proto (see evoscale.spec). When a study of that display name exists, the
        server answers it if its spec is the same and AlreadyExistsError naming the first
        difference if not. With load_if_exists=False, an existing study of that display name
        raises DuplicatedStudyError instead (checked before creating: two creators racing with
        load_if_exists=False may both succeed and share one study).
        """
        study = study_from_spec(display_name, spec)
        if metadata:
            study.metadata.update(_check_metadata(metadata))
        if not load_if_exists:
            existing = self.list_studies(display_name=display_name)
            if existing:
                names = ", ".join(s.name for s in existing)
                raise DuplicatedStudyError(
                    f'study display_name "{display_name}" is already used by {names}'
                )
        created = self.call("CreateStudy", study_pb2.CreateStudyRequest(study=study))
        return Study(self, created)

    def get_study(self, name: str | int) -> Study:
        """The study `name` ("studies/7", or 7). Unknown: NotFoundError."""
        return Study(self, self.call("GetStudy", study_pb2.GetStudyRequest(name=_study_name(name))))

    def list_studies(self, display_name: str | None = None) -> list[Study]:
        """Every study (all pages), or only those with exactly this display name."""
        studies = []
        token = ""
        while True:
            response = self.call(
                "ListStudies",
                study_pb2.ListStudiesRequest(
                    page_size=_PAGE_SIZE, page_token=token, display_name=display_name or ""
                ),
            )
            studies.extend(
                Study(self, s)
                for s in response.studies
                if display_name is None or s.display_name == display_name
            )
            token = response.next_page_token
            if not token:
                return studies

    def delete_study(self, study: Study | str | int) -> None:
        """Deletes a study and its trials. Unknown: NotFoundError."""
        name = study.name if isinstance(study, Study) else _study_name(study)
        self.call("DeleteStudy", study_pb2.DeleteStudyRequest(name=name))

    def get_trial(self, name: str) -> Trial:
        """The trial "studies/S/trials/T". Unknown: NotFoundError."""
        return Trial(self, self.call("GetTrial", study_pb2.GetTrialRequest(name=name)))


class Study(_MetadataMethods):
    """A study on the server. `name`, `display_name` and `spec` are fixed; `state`,
    `metadata`, `spent_core_seconds` and `remaining_core_seconds` ask the server each time they
    are read."""

    def __init__(self, client: Client, proto: study_pb2.Study) -> None:
        self.client = client
        self.proto = proto  # what the server answered last
        self.metric_names: tuple[str, ...] = tuple(m.name for m in proto.spec.metrics)

    def __repr__(self) -> str:
        return f"Study(name={self.name!r}, display_name={self.display_name!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Study) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def display_name(self) -> str:
        return self.proto.display_name

    @property
    def spec(self) -> study_pb2.StudySpec:
        return self.proto.spec

    def refresh(self) -> Study:
        """Reads the study again (GetStudy) and returns self."""
        self.proto = self.client.call("GetStudy", study_pb2.GetStudyRequest(name=self.name))
        return self

    @property
    def state(self) -> str:
        """"ACTIVE", "INACTIVE" or "COMPLETED" (budget spent), read from the server."""
        return study_pb2.Study.State.Name(self.refresh().proto.state)

    def set_state(self, state: str) -> None:
        """Sets "ACTIVE", "INACTIVE" (paused: ask raises FailedPreconditionError) or
        "COMPLETED"."""
        request = study_pb2.SetStudyStateRequest(
            name=self.name, state=study_pb2.Study.State.Value(state)
        )
        self.proto = self.client.call("SetStudyState", request)

    @property
    def metadata(self) -> dict[str, str]:
        """The study's metadata, read from the server."""
        return dict(self.refresh().proto.metadata)

    @property
    def spent_core_seconds(self) -> float:
        """What the study's trials have spent, in core-seconds (each trial: the cores it held x
        its wall seconds; an ask/tell trial: resources.cpu_cores, 1 when unset, x its latest
        measurement's elapsed_seconds), read from the server."""
        return self.refresh().proto.spent_core_seconds

    @property
    def remaining_core_seconds(self) -> float | None:
        """What is left of spec.budget_core_seconds (never below 0), read from the server;
        None when the study has no budget."""
        proto = self.refresh().proto
        if proto.spec.budget_core_seconds <= 0:
            return None
        return proto.remaining_core_seconds

    def update_metadata(
        self, set: Mapping[str, str] | None = None, remove: Iterable[str] = ()
    ) -> dict[str, str]:
        """Sets and removes metadata keys in one call (UpdateMetadata)."""
        return _update_metadata(self.client, self.name, set, remove)

    def delete(self) -> None:
        self.client.delete_study(self)

    # ---- Ask and tell ----------------------------------------------------------------------

    def ask(self, count: int = 1, client_id: str | None = None) -> list[Trial]:
        """Up to `count` trials for this client to run (SuggestTrials with `client_id`, by
        default the Client's): the ACTIVE trials that client id already holds first, so a
        retried ask gets the same trials. An empty list means the budget is spent (max_trials
        reached and the study COMPLETED)."""
        response = self.client.call(
            "SuggestTrials",
            study_pb2.SuggestTrialsRequest(
                parent=self.name,
                suggestion_count=count,
                client_id=client_id or self.client.client_id,
            ),
        )
        return [Trial(self.client, t, self.metric_names) for t in response.trials]

    def tell(
        self,
        trial: Trial | str,
        metrics: Metrics | None = None,
        *,
        infeasible: str | None = None,
        elapsed_seconds: float | None = None,
    ) -> Trial:
        """Completes a trial (CompleteTrial) and returns it as the server stored it.

        `metrics`: a dict of metric values, or one number when the study has a single metric;
        None uses the trial's last measurement. `infeasible="reason"` marks the trial
        INFEASIBLE instead (it then needs no metrics). A trial stopped before (trial.stop())
        ends STOPPED rather than SUCCEEDED.
        """
        name = trial.name if isinstance(trial, Trial) else trial
        request = study_pb2.CompleteTrialRequest(name=name)
        if metrics is not None:
            request.final_measurement.metrics.update(_metric_dict(metrics, self.metric_names))
            if elapsed_seconds is None and isinstance(trial, Trial):
                elapsed_seconds = trial.elapsed_seconds()
            request.final_measurement.elapsed_seconds = elapsed_seconds or 0.0
        if infeasible is not None:
            request.trial_infeasible = True
            request.infeasible_reason = infeasible
        done = self.client.call("CompleteTrial", request)
        if isinstance(trial, Trial):
            trial.proto = done
            return trial
        return Trial(self.client, done, self.metric_names)

    def create_trial(
        self,
        params: Mapping[str, ParamValue],
        metrics: Metrics | None = None,
        *,
        stopped: bool = False,
        infeasible: str | None = None,
        measurements: Iterable[tuple[int, Metrics]] = (),
        active: bool = False,
        client_id: str | None = None,
    ) -> Trial:
        """Adds a trial with these parameters (CreateTrial). Without a result, a REQUESTED one
        that the next ask hands out. With a result known from elsewhere: `metrics` makes it
        SUCCEEDED; `stopped=True` STOPPED (a run stopped early: `metrics`, else its last
        measurement, is final); `infeasible="why"` INFEASIBLE. `active=True` makes it ACTIVE
        instead: parameters chosen elsewhere, run by this client from now (report, should_stop,
        tell as an asked trial; no result yet; once a budget_core_seconds is spent, the server
        answers FailedPreconditionError). `measurements` are its intermediate (step, metrics)
        pairs; `client_id` the client running it (default: the Client's)."""
        if active and (metrics is not None or stopped or infeasible is not None):
            raise ValueError("active: an ACTIVE trial is still running; it has no result yet")
        trial = study_pb2.Trial(client_id=client_id or self.client.client_id)
        for key, value in params.items():
            trial.parameters.append(_parameter(key, value))
        for step, values in measurements:
            measurement = trial.measurements.add(step=step)
            measurement.metrics.update(_metric_dict(values, self.metric_names))
        if metrics is not None:
            trial.final_measurement.metrics.update(_metric_dict(metrics, self.metric_names))
        if infeasible is not None:
            trial.state = study_pb2.Trial.INFEASIBLE
            trial.infeasible_reason = infeasible
        elif stopped:
            trial.state = study_pb2.Trial.STOPPED
        elif metrics is not None:
            trial.state = study_pb2.Trial.SUCCEEDED
        elif active:
            trial.state = study_pb2.Trial.ACTIVE
        created = self.client.call(
            "CreateTrial", study_pb2.CreateTrialRequest(parent=self.name, trial=trial)
        )
        return Trial(self.client, created, self.metric_names)

    def get_trial(self, trial: str | int) -> Trial:
        """The trial with this id or name. Unknown: NotFoundError."""
        name = trial if isinstance(trial, str) else f"{self.name}/trials/{trial}"
        proto = self.client.call("GetTrial", study_pb2.GetTrialRequest(name=name))
        return Trial(self.client, proto, self.metric_names)

    def delete_trial(self, trial: Trial | str | int) -> None:
        """Removes a trial of any state (DeleteTrial); later calls on it raise NotFoundError."""
        if isinstance(trial, Trial):
            name = trial.name
        else:
            name = trial if isinstance(trial, str) else f"{self.name}/trials/{trial}"
        self.client.call("DeleteTrial", study_pb2.DeleteTrialRequest(name=name))

    # ---- Results ---------------------------------------------------------------------------

    @property
    def trials(self) -> list[Trial]:
        """Every trial, in id order (ListTrials, all pages)."""
        return list(self.iter_trials())

    def iter_trials(self, state: str | None = None) -> Iterator[Trial]:
        """The trials page by page, only those in `state` ("SUCCEEDED", ...) when given."""
        state_value = study_pb2.Trial.State.Value(state) if state else 0
        token = ""
        while True:
            response = self.client.call(
                "ListTrials",
                study_pb2.ListTrialsRequest(
                    parent=self.name, state=state_value, page_size=_PAGE_SIZE, page_token=token
                ),
            )
            for t in response.trials:
                yield Trial(self.client, t, self.metric_names)
            token = response.next_page_token
            if not token:
                return

    @property
    def best_trials(self) -> list[Trial]:
        """The optimal trials (ListOptimalTrials): the best one, or the Pareto front of a
        multi-metric study. STOPPED, INFEASIBLE and unsafe trials are never among them."""
        response = self.client.call(
            "ListOptimalTrials", study_pb2.ListOptimalTrialsRequest(parent=self.name)
        )
        return [Trial(self.client, t, self.metric_names) for t in response.optimal_trials]

    def parameter_importance(self, metric: str | None = None) -> dict[str, float]:
        """Each parameter's importance for `metric` (default: the first objective), most
        important first, summing to 1 (GetParameterImportance: the share of the metric's
        variance over the SUCCEEDED trials its main effect explains), as Optuna's
        optuna.importance.get_param_importances answers."""
        response = self.client.call(
            "GetParameterImportance",
            study_pb2.GetParameterImportanceRequest(parent=self.name, metric=metric or ""),
        )
        return {p.name: p.importance for p in response.parameters}

    def trials_dataframe(self) -> pandas.DataFrame:
        """One row per trial: id, name, state, client_id, start/end time, `params_NAME` per
        parameter and `values_METRIC` per metric of the final measurement (NaN where absent)."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "Study.trials_dataframe() needs pandas (Debian: apt-get install python3-pandas; "
                "or pip install pandas)"
            ) from None
        rows = []
        for t in self.iter_trials():
            row: dict[str, Any] = {
                "id": t.id,
                "name": t.name,
                "state": t.state,
                "client_id": t.client_id,
                "start_time": t.start_time,
                "end_time": t.end_time,
            }
            row.update({f"params_{k}": v for k, v in t.params.items()})
            final = t.final_metrics or {}
            row.update({f"values_{m}": final.get(m, float("nan")) for m in self.metric_names})
            rows.append(row)
        columns = ["id", "name", "state", "client_id", "start_time", "end_time"]
        params = sorted({k for row in rows for k in row if k.startswith("params_")})
        columns += params + [f"values_{m}" for m in self.metric_names]
        return pandas.DataFrame(rows, columns=columns)


@dataclass(frozen=True)
class Measurement:
    step: int
    elapsed_seconds: float
    metrics: dict[str, float]

    @classmethod
    def from_proto(cls, m: study_pb2.Measurement) -> Measurement:
        return cls(step=m.step, elapsed_seconds=m.elapsed_seconds, metrics=dict(m.metrics))


class Trial(_MetadataMethods):
    """A trial on the server, as last answered. report/should_stop/stop/set_metadata call the
    server; `trial.proto` is the raw message."""

    def __init__(
        self, client: Client, proto: study_pb2.Trial, metric_names: tuple[str, ...] = ()
    ) -> None:
        self.client = client
        self.proto = proto
        self.metric_names = metric_names  # the study's, for report/tell with one number
        self._received = time.monotonic()  # elapsed_seconds counts from here

    def __repr__(self) -> str:
        return f"Trial(name={self.name!r}, state={self.state}, params={self.params!r})"

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def id(self) -> int:
        return self.proto.id

    @property
    def state(self) -> str:
        """"REQUESTED", "ACTIVE", "STOPPING", "SUCCEEDED", "STOPPED", "INFEASIBLE" or "FAILED"."""
        return study_pb2.Trial.State.Name(self.proto.state)

    @property
    def client_id(self) -> str:
        return self.proto.client_id

    @property
    def params(self) -> dict[str, ParamValue]:
        """Parameter values: float (double and discrete), int (integer) or str (categorical)."""
        out: dict[str, ParamValue] = {}
        for p in self.proto.parameters:
            kind = p.WhichOneof("value")
            if kind is not None:
                out[p.name] = getattr(p, kind)
        return out

    @property
    def final_metrics(self) -> dict[str, float] | None:
        """The final measurement's metrics, or None while the trial has none."""
        metrics = self.proto.final_measurement.metrics
        return dict(metrics) if metrics else None

    @property
    def measurements(self) -> list[Measurement]:
        return [Measurement.from_proto(m) for m in self.proto.measurements]

    @property
    def metadata(self) -> dict[str, str]:
        return dict(self.proto.metadata)

    @property
    def infeasible_reason(self) -> str:
        return self.proto.infeasible_reason

    @property
    def start_time(self) -> datetime.datetime | None:
        return _datetime(self.proto, "start_time")

    @property
    def end_time(self) -> datetime.datetime | None:
        return _datetime(self.proto, "end_time")

    def elapsed_seconds(self) -> float:
        """Seconds since this process received the trial."""
        return time.monotonic() - self._received

    def refresh(self) -> Trial:
        """Reads the trial again (GetTrial) and returns self."""
        self.proto = self.client.call("GetTrial", study_pb2.GetTrialRequest(name=self.name))
        return self

    def report(
        self, step: int, metrics: Metrics, elapsed_seconds: float | None = None
    ) -> None:
        """Adds an intermediate measurement (AddTrialMeasurement). `metrics`: a dict, or one
        number when the study has a single metric. `elapsed_seconds` defaults to the time since
        this process got the trial."""
        measurement = study_pb2.Measurement(
            step=step,
            elapsed_seconds=self.elapsed_seconds() if elapsed_seconds is None else elapsed_seconds,
        )
        measurement.metrics.update(_metric_dict(metrics, self.metric_names))
        self.proto = self.client.call(
            "AddTrialMeasurement",
            study_pb2.AddTrialMeasurementRequest(trial_name=self.name, measurement=measurement),
        )

    def should_stop(self) -> bool:
        """Whether the study's early-stopping policy (or a stop()) says to stop this trial."""
        response = self.client.call(
            "CheckTrialEarlyStoppingState",
            study_pb2.CheckTrialEarlyStoppingStateRequest(trial_name=self.name),
        )
        return response.should_stop

    def stop(self) -> None:
        """Marks the trial STOPPING (StopTrial); completing it then makes it STOPPED."""
        self.proto = self.client.call("StopTrial", study_pb2.StopTrialRequest(name=self.name))

    def update_metadata(
        self, set: Mapping[str, str] | None = None, remove: Iterable[str] = ()
    ) -> dict[str, str]:
        """Sets and removes metadata keys in one call (UpdateMetadata)."""
        metadata = _update_metadata(self.client, self.name, set, remove)
        self.proto.metadata.clear()
        self.proto.metadata.update(metadata)
        return metadata


# ---- Helpers -------------------------------------------------------------------------------


def _study_name(name: str | int) -> str:
    return f"studies/{name}" if isinstance(name, int) else name


def _metric_dict(metrics: Metrics, metric_names: tuple[str, ...]) -> dict[str, float]:
    if isinstance(metrics, Mapping):
        return {str(k): float(v) for k, v in metrics.items()}
    if isinstance(metrics, numbers.Real) and not isinstance(metrics, bool):
        if len(metric_names) != 1:
            raise ValueError(
                f"metrics: one number needs a study with exactly one metric; this study has "
                f"{list(metric_names) or 'unknown metrics'}: pass a dict {{metric: value}}"
            )
        return {metric_names[0]: float(metrics)}
    raise TypeError(f"metrics: want a dict or a number, got {type(metrics).__name__}")


def _parameter(name: str, value: ParamValue) -> study_pb2.Parameter:
    if isinstance(value, bool):
        raise TypeError(f'parameter "{name}": a bool is no parameter value (use a categorical)')
    if isinstance(value, int):
        return study_pb2.Parameter(name=name, int_value=value)
    if isinstance(value, float):
        return study_pb2.Parameter(name=name, double_value=value)
    if isinstance(value, str):
        return study_pb2.Parameter(name=name, string_value=value)
    raise TypeError(f'parameter "{name}": want a float, int or str, got {type(value).__name__}')


def _check_metadata(values: Mapping[str, str]) -> dict[str, str]:
    for key, value in values.items():
        if not isinstance(value, str):
            raise TypeError(f'metadata["{key}"]: want a str, got {type(value).__name__}')
    return dict(values)


def _update_metadata(
    client: Client, name: str, set: Mapping[str, str] | None, remove: Iterable[str]
) -> dict[str, str]:
    request = study_pb2.UpdateMetadataRequest(name=name, remove=list(remove))
    request.set.update(_check_metadata(set or {}))
    return dict(client.call("UpdateMetadata", request).metadata)


def _datetime(proto: Any, field: str) -> datetime.datetime | None:
    if not proto.HasField(field):
        return None
    return getattr(proto, field).ToDatetime(tzinfo=datetime.timezone.utc)
