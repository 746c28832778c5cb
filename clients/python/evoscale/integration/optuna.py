"""EvoscaleSampler and EvoscalePruner: Optuna's sampler and pruner backed by evoscaled.

EvoscaleSampler: an Optuna sampler whose suggestions come from an evoscaled study.

An Optuna script changes one line:

    study = optuna.create_study(sampler=EvoscaleSampler("127.0.0.1:50051"))
    study.optimize(objective, n_trials=100)

How it works. Optuna's search space is defined by running the objective, so it is known only
after the first trial. Until `n_startup_trials` trials (default 1) have completed, parameters
are drawn at random (optuna.samplers.RandomSampler(seed)). When the first trial completes, the
sampler creates (or, by the same display name and spec, rejoins) an evoscale study over the
intersection search space of the completed trials: display name = `study_name` or the Optuna
study's name; one metric per objective ("value", or "value_0", "value_1", ... for several),
goals from the directions; the parameters sorted by name:

- FloatDistribution -> double_spec (LOG scale when log=True); with a step, discrete_spec of
  the grid (double_spec snapped to the grid past 10000 points);
- IntDistribution -> integer_spec (LOG when log=True); with step > 1, discrete_spec;
- CategoricalDistribution -> categorical_spec of the choices' text (str(choice), or repr(choice)
  where two choices have the same str); single-value distributions stay out.

Every later trial asks evoscaled for one trial (SuggestTrials, client id CLIENT-NUMBER, so
threads of one process never share a trial) and takes its values for the parameters of that
space; parameters outside it are drawn at random. Its evoscale trial name is stored in the
Optuna trial's system attrs (key "evoscale:trial"). When the Optuna trial ends, after_trial
sends its intermediate values (AddTrialMeasurement, one per step) and then:

- COMPLETE -> CompleteTrial with the values (SUCCEEDED; a non-finite value: INFEASIBLE);
- PRUNED   -> StopTrial, then CompleteTrial: STOPPED, its last intermediate value final;
- FAIL     -> CompleteTrial(trial_infeasible), the reason naming the Optuna trial.

Trials that did not come from evoscaled (the startup trials, and any drawn at random later)
are mirrored with CreateTrial when they end, so every Optuna trial is visible in evoscaled and
the designer learns from it, each created in its final state in one call (no other client
can be handed it meanwhile): a COMPLETE one as SUCCEEDED with its values, a PRUNED one as
STOPPED with its intermediate values (its last one final), a FAIL one as INFEASIBLE.
Trials that ended before the study existed (failed or pruned before the first trial
completed) are mirrored when it is created, without the system attr (Optuna allows none on a
finished trial).

Optuna's pruners keep working: they read Optuna's own intermediate values. Once the study's
max_trials (or budget_core_seconds) is spent, later trials are drawn at random and not
mirrored (a warning says so). With an EvoscalePruner (below) as the study's pruner, the
evoscale study is created with the pruner's early_stopping and budget_core_seconds, the
pruner decides on the sampler's trials, and the intermediate values it has sent are not sent
again.
Failures of the mirroring calls are logged as warnings and do not stop the optimization; a
failure to create the study (e.g. ALREADY_EXISTS: the display name holds another spec) does.

EvoscalePruner: an Optuna pruner whose decisions are evoscaled's early stopping (COST_AWARE,
ASHA or MEDIAN), with any sampler (TPE, random, ...):

    pruner = EvoscalePruner("127.0.0.1:50051", policy="COST_AWARE", max_step=20,
                            budget_core_seconds=3600)
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(), pruner=pruner)
    study.optimize(objective, n_trials=100, callbacks=[pruner.callback])

How it works. At the first trial.should_prune() after a report, the pruner creates (or, by the
same display name and spec, rejoins) an evoscale study over that trial's distributions (the
conversions above; single-value ones stay out): display name = `study_name` or the Optuna
study's name, one metric "value" with the study's direction, early_stopping {policy,
max_step, min_resource, reduction_factor, min_trials} and budget_core_seconds as given. Each
Optuna trial gets an evoscale trial at its first should_prune() with a value: CreateTrial in
state ACTIVE (its parameters chosen by Optuna, run from now) with client id PREFIX-NUMBER,
its name kept in the system attr "evoscale:trial". A trial whose parameters are not in the
evoscale study's space (another conditional branch) gets none; the pruner then answers False
for it. Each should_prune() sends the intermediate values not sent yet (AddTrialMeasurement:
step = Optuna's step, elapsed_seconds = seconds since the trial's start, never decreasing;
non-finite values are skipped), then answers CheckTrialEarlyStoppingState's should_stop
(evoscaled keeps the decision: the trial is STOPPING). A trial's cost is its elapsed seconds
(1 core). Once the study has spent budget_core_seconds, CreateTrial refuses new trials
(FAILED_PRECONDITION) and the pruner prunes every new trial at its first report (a warning
says so once), so the evoscale study stops growing.

When an Optuna trial has ended, its evoscale trial is completed as it ended: COMPLETE ->
CompleteTrial with its value (SUCCEEDED; a non-finite value: INFEASIBLE); PRUNED -> StopTrial
unless evoscaled stopped it, then CompleteTrial: STOPPED, its last measurement final; FAIL ->
CompleteTrial(trial_infeasible). This happens at the next prune() call of any trial, or at
once with `callbacks=[pruner.callback]` (without it, the last trials of an optimize() stay
ACTIVE in evoscaled until a later should_prune()); both are idempotent and safe from the
threads of study.optimize(n_jobs=N). Failures of these calls are logged as warnings and the
pruner then answers False; a failure to create the study raises.

Both together (sampler=EvoscaleSampler(...), pruner=EvoscalePruner(...)) share one evoscale
study: the sampler's, which it creates with the pruner's early_stopping and budget when the
first trial completes (the pruner decides nothing before). The pruner reports to the trials
the sampler asked for (it does not create a second one) and the sampler completes them,
sending only the values the pruner did not (the pruner keeps the last step it sent in the
system attr "evoscale:reported_step"); trials the sampler did not ask for (random startup
trials, enqueued ones, those after the study's budget) are created by the pruner, which
completes them. The sampler's study_name and client are used; the pruner's are ignored.
"""

from __future__ import annotations

import datetime
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.pruners import BasePruner
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import Study as OptunaStudy
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

try:  # Optuna >= 3.2
    from optuna.search_space import IntersectionSearchSpace
except ImportError:  # Optuna 3.1
    from optuna.samplers import IntersectionSearchSpace

from evoscale.client import Client, Study, Trial
from evoscale.errors import EvoscaleError, FailedPreconditionError
from evoscale.v1 import study_pb2

TRIAL_ATTR = "evoscale:trial"
"""The Optuna trial system attr holding the evoscale trial name."""

REPORTED_ATTR = "evoscale:reported_step"
"""The Optuna trial system attr holding the last step an EvoscalePruner sent to evoscaled."""

_MAX_DISCRETE_VALUES = 10000  # evoscaled's limit of values per parameter

_logger = optuna.logging.get_logger(__name__)


@dataclass(frozen=True)
class _Codec:
    """One parameter: its evoscale spec and the value conversions both ways."""

    spec: study_pb2.ParameterSpec
    distribution: BaseDistribution

    def to_optuna(self, value: Any) -> Any:
        d = self.distribution
        if isinstance(d, CategoricalDistribution):
            return d.choices[_labels(d).index(str(value))]
        if isinstance(d, IntDistribution):
            step = d.step
            k = round((float(value) - d.low) / step)
            return int(min(max(d.low + k * step, d.low), d.high))
        if isinstance(d, FloatDistribution):
            x = float(value)
            if d.step is not None:
                x = d.low + round((x - d.low) / d.step) * d.step
            return min(max(x, d.low), d.high)
        raise TypeError(f"unsupported distribution {d!r}")

    def to_evoscale(self, value: Any) -> float | int | str:
        d = self.distribution
        if isinstance(d, CategoricalDistribution):
            return _labels(d)[d.choices.index(value)]
        if self.spec.WhichOneof("parameter_value_spec") == "integer_spec":
            return int(value)
        return float(value)


def _labels(d: CategoricalDistribution) -> list[str]:
    labels = [str(c) for c in d.choices]
    if len(set(labels)) < len(labels):
        labels = [repr(c) for c in d.choices]
    return labels


def _grid(low: float, high: float, step: float) -> list[float]:
    count = int(round((high - low) / step)) + 1
    return [low + i * step for i in range(count)]


def _codec(name: str, d: BaseDistribution) -> _Codec:
    """The evoscale ParameterSpec for an Optuna distribution."""
    spec = study_pb2.ParameterSpec(name=name)
    if isinstance(d, CategoricalDistribution):
        spec.categorical_spec.values.extend(_labels(d))
    elif isinstance(d, IntDistribution):
        if d.step == 1 or d.log or (d.high - d.low) // d.step + 1 > _MAX_DISCRETE_VALUES:
            spec.integer_spec.min, spec.integer_spec.max = d.low, d.high
        else:
            spec.discrete_spec.values.extend(float(v) for v in range(d.low, d.high + 1, d.step))
        if d.log:
            spec.scale = study_pb2.ParameterSpec.LOG
    elif isinstance(d, FloatDistribution):
        grid = None
        if d.step is not None and (d.high - d.low) / d.step < _MAX_DISCRETE_VALUES:
            grid = _grid(d.low, d.high, d.step)
        if grid is not None:
            spec.discrete_spec.values.extend(grid)
        else:
            spec.double_spec.min, spec.double_spec.max = d.low, d.high
            if d.log:
                spec.scale = study_pb2.ParameterSpec.LOG
    else:
        raise TypeError(f'parameter "{name}": unsupported distribution {d!r}')
    return _Codec(spec=spec, distribution=d)


def _metric_names(directions: Sequence[StudyDirection]) -> list[str]:
    if len(directions) == 1:
        return ["value"]
    return [f"value_{i}" for i in range(len(directions))]


class EvoscaleSampler(BaseSampler):
    """An Optuna sampler backed by an evoscaled study (see the module's docstring).

    Args:
        address, token, tls_ca: how to reach evoscaled (as evoscale.Client).
        algorithm: the study's AlgorithmSpec.algorithm: GENETIC, REGULARIZED_EVOLUTION, NSGA2
            (several objectives), RANDOM, QUASI_RANDOM or GRID.
        study_name: the evoscale study's display name; default: the Optuna study's name.
        seed: the evoscale study's seed and the random startup sampler's.
        max_trials: the evoscale study's budget (0: unlimited).
        settings: the algorithm's settings, e.g. {"population_size": "12"}.
        n_startup_trials: completed trials drawn at random before evoscaled suggests (at least
            1: the search space is learnt from the first). The GENETIC designer's own first
            population is quasi-random already, so more are seldom useful.
        client: an existing evoscale.Client to use instead of address/token/tls_ca.
    """

    def __init__(
        self,
        address: str = "127.0.0.1:50051",
        algorithm: str = "GENETIC",
        study_name: str | None = None,
        token: str | None = None,
        tls_ca: str | None = None,
        seed: int | None = None,
        max_trials: int = 0,
        *,
        settings: dict[str, Any] | None = None,
        n_startup_trials: int = 1,
        client: Client | None = None,
    ) -> None:
        if algorithm not in study_pb2.AlgorithmSpec.Algorithm.keys():
            names = study_pb2.AlgorithmSpec.Algorithm.keys()
            known = ", ".join(k for k in names if k != "ALGORITHM_UNSPECIFIED")
            raise ValueError(f'algorithm: unknown algorithm "{algorithm}" (known: {known})')
        self._client = client or Client(address, token=token, tls_ca=tls_ca)
        self._algorithm = algorithm
        self._study_name = study_name
        self._seed = seed
        self._max_trials = max_trials
        self._settings = {str(k): str(v) for k, v in (settings or {}).items()}
        self._n_startup_trials = max(1, n_startup_trials)
        self._random = RandomSampler(seed=seed)
        self._intersection = IntersectionSearchSpace()
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._study: Study | None = None  # the evoscale study, once made
        self._codecs: dict[str, _Codec] = {}  # by parameter name, fixed when the study is made
        self._metrics: list[str] = []
        self._active: dict[int, Trial] = {}  # Optuna trial id -> its evoscale trial
        self._early: list[tuple[FrozenTrial, TrialState, Sequence[float] | None]] = []
        self._budget_spent = False
        self._pruner: EvoscalePruner | None = None  # one that called prune(), see _attach

    @property
    def client(self) -> Client:
        return self._client

    @property
    def evoscale_study(self) -> Study | None:
        """The evoscale study, once the first trials have defined the search space."""
        return self._study

    def reseed_rng(self) -> None:
        self._random.reseed_rng()

    def _attach(self, pruner: EvoscalePruner) -> None:
        """Makes the evoscale study, when it is yet to be made, with `pruner`'s early stopping
        and budget (for a pruner that is not the Optuna study's own, e.g. wrapped)."""
        with self._lock:
            if self._pruner is None:
                self._pruner = pruner

    def _space(self) -> tuple[Study, dict[str, _Codec]] | None:
        """The evoscale study and its parameters, once made."""
        with self._lock:
            if self._study is None:
                return None
            return self._study, self._codecs

    # ---- Sampling -------------------------------------------------------------------------

    def infer_relative_search_space(
        self, study: OptunaStudy, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        space = {
            name: d
            for name, d in self._intersection.calculate(study).items()
            if not d.single()
        }
        completed = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        with self._lock:
            if self._study is None:
                if completed == 0 or not space:
                    return {}
                self._create_study(study, space)  # e.g. resuming a stored Optuna study
            if completed < self._n_startup_trials:
                return {}
            # The evoscale study's space, less what the Optuna study no longer uses alike.
            return {
                name: c.distribution
                for name, c in self._codecs.items()
                if space.get(name) == c.distribution
            }

    def sample_relative(
        self, study: OptunaStudy, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        if not search_space or self._study is None or self._budget_spent:
            return {}
        if trial.system_attrs.get("fixed_params"):
            return {}  # study.enqueue_trial's values win; the trial is mirrored when it ends
        trials = self._study.ask(1, client_id=f"{self._client.client_id}-{trial.number}")
        if not trials:
            with self._lock:
                if not self._budget_spent:
                    spec = self._study.spec
                    _logger.warning(
                        f"evoscale study {self._study.name} hands out no more trials "
                        f"(max_trials={spec.max_trials}, budget_core_seconds="
                        f"{spec.budget_core_seconds:g}); later trials are drawn at random and "
                        "not mirrored"
                    )
                self._budget_spent = True
            return {}
        evo = trials[0]
        study._storage.set_trial_system_attr(trial._trial_id, TRIAL_ATTR, evo.name)
        with self._lock:
            self._active[trial._trial_id] = evo
        params = evo.params
        return {
            name: self._codecs[name].to_optuna(params[name])
            for name in search_space
            if name in params
        }

    def sample_independent(
        self,
        study: OptunaStudy,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    # ---- Results --------------------------------------------------------------------------

    def after_trial(
        self,
        study: OptunaStudy,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        with self._lock:
            evo = self._active.pop(trial._trial_id, None)
            if evo is None and TRIAL_ATTR in trial.system_attrs:
                return  # an EvoscalePruner created its evoscale trial, and completes it
            if evo is None and self._budget_spent:
                return  # drawn at random once the study handed out no more: not mirrored
            if self._study is None:
                if state != TrialState.COMPLETE:
                    self._early.append((trial, state, values))
                    return
                space = self._space_with(study, trial)
                if not space:
                    self._early.append((trial, state, values))
                    return
                self._create_study(study, space)
        try:
            if evo is not None:
                self._finish(evo, trial, state, values)
            else:
                name = self._mirror(trial, state, values)
                if name is not None:
                    study._storage.set_trial_system_attr(trial._trial_id, TRIAL_ATTR, name)
        except EvoscaleError as e:
            _warn_not_recorded(trial, e)

    def _space_with(self, study: OptunaStudy, trial: FrozenTrial) -> dict[str, BaseDistribution]:
        """The intersection search space once `trial` (not yet stored as COMPLETE) counts."""
        space = {n: d for n, d in trial.distributions.items() if not d.single()}
        if study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            before = self._intersection.calculate(study)
            space = {n: d for n, d in space.items() if before.get(n) == d}
        return space

    def _create_study(self, study: OptunaStudy, space: dict[str, BaseDistribution]) -> None:
        """Creates (or rejoins) the evoscale study, then mirrors the trials that ended before.
        Holds _lock."""
        codecs = {name: _codec(name, space[name]) for name in sorted(space)}
        metrics = _metric_names(study.directions)
        spec = study_pb2.StudySpec(max_trials=self._max_trials)
        for name, direction in zip(metrics, study.directions):
            goal = "MAXIMIZE" if direction == StudyDirection.MAXIMIZE else "MINIMIZE"
            spec.metrics.add(name=name, goal=study_pb2.MetricSpec.Goal.Value(goal))
        spec.parameters.extend(c.spec for c in codecs.values())
        spec.algorithm.algorithm = study_pb2.AlgorithmSpec.Algorithm.Value(self._algorithm)
        spec.algorithm.settings.update(self._settings)
        if self._seed is not None:
            spec.algorithm.seed = self._seed
        pruner = self._pruner or study.pruner
        if isinstance(pruner, EvoscalePruner):
            pruner._configure(spec)
        self._study = self._client.create_study(self._study_name or study.study_name, spec)
        self._codecs = codecs
        self._metrics = metrics
        early, self._early = self._early, []
        for trial, state, values in early:
            try:
                self._mirror(trial, state, values)
            except EvoscaleError as e:
                _warn_not_recorded(trial, e)

    def _metric_values(self, values: Sequence[float] | None) -> dict[str, float] | None:
        """The metrics of `values`, or None when one is missing or not finite."""
        if values is None or len(values) != len(self._metrics):
            return None
        if not all(math.isfinite(v) for v in values):
            return None
        return dict(zip(self._metrics, (float(v) for v in values)))

    def _finish(
        self, evo: Trial, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> None:
        """Ends the evoscale trial `evo` as Optuna's trial ended."""
        assert self._study is not None
        measurements = self._intermediate(trial)
        reported = len(measurements)
        sent = trial.system_attrs.get(REPORTED_ATTR, -1)  # by an EvoscalePruner, with times
        for step, metrics in measurements:
            if step > sent:
                evo.report(step, metrics, elapsed_seconds=0.0)
        elapsed = _elapsed(trial)
        if state == TrialState.COMPLETE:
            metrics = self._metric_values(values)
            if metrics is None:
                self._study.tell(evo, infeasible=f"objective value {values} is not finite")
            else:
                self._study.tell(evo, metrics, elapsed_seconds=elapsed)
        elif state == TrialState.PRUNED:
            if reported == 0:
                self._study.tell(evo, infeasible="pruned by Optuna before reporting a value")
            else:
                evo.stop()
                self._study.tell(evo)  # the last measurement is final
        else:
            self._study.tell(evo, infeasible=_fail_reason(trial, state))

    def _mirror(
        self, trial: FrozenTrial, state: TrialState, values: Sequence[float] | None
    ) -> str | None:
        """Records a trial that evoscaled did not suggest (CreateTrial); returns its name, or
        None when it cannot be recorded (parameters outside the study's space)."""
        assert self._study is not None
        params = {}
        for name, codec in self._codecs.items():
            if trial.distributions.get(name) != codec.distribution:
                _logger.debug(f"trial {trial.number} is not in the evoscale study's space")
                return None
            params[name] = codec.to_evoscale(trial.params[name])
        measurements = self._intermediate(trial)
        metrics = self._metric_values(values) if state == TrialState.COMPLETE else None
        result: dict[str, Any] = {"measurements": measurements}
        if state == TrialState.COMPLETE and metrics is not None:
            result["metrics"] = metrics
        elif state == TrialState.PRUNED and measurements:
            result["stopped"] = True
        elif state == TrialState.PRUNED:
            result["infeasible"] = "pruned by Optuna before reporting a value"
        elif state == TrialState.COMPLETE:
            result["infeasible"] = f"objective value {values} is not finite"
        else:
            result["infeasible"] = _fail_reason(trial, state)
        try:
            created = self._study.create_trial(params, **result)
        except FailedPreconditionError:
            if self._budget_spent:
                return None  # max_trials reached: said once already
            raise
        return created.name

    def _intermediate(self, trial: FrozenTrial) -> list[tuple[int, dict[str, float]]]:
        """Optuna's finite intermediate values as (step, metrics) (single-objective only)."""
        if len(self._metrics) != 1:
            return []
        return [
            (step, {self._metrics[0]: value})
            for step, value in sorted(trial.intermediate_values.items())
            if math.isfinite(value)
        ]


def _warn_not_recorded(trial: FrozenTrial, error: EvoscaleError) -> None:
    _logger.warning(f"evoscale: trial {trial.number} was not recorded in evoscaled: {error}")


def _fail_reason(trial: FrozenTrial, state: TrialState) -> str:
    reason = trial.system_attrs.get("fail_reason")
    return f"Optuna trial {trial.number} {state.name}" + (f": {reason}" if reason else "")


def _elapsed(trial: FrozenTrial) -> float:
    if trial.datetime_start is None:
        return 0.0
    return max(0.0, (datetime.datetime.now() - trial.datetime_start).total_seconds())


# ---- EvoscalePruner --------------------------------------------------------------------------

_POLICIES = ("COST_AWARE", "ASHA", "MEDIAN")


@dataclass
class _Tracked:
    """What the pruner knows of one running Optuna trial. `evo` is None when the trial has no
    evoscale twin: `budget_spent` (prune it) or untracked (no decision)."""

    evo: Trial | None = None
    evo_study: Study | None = None  # the study of `evo`, when the pruner completes it
    budget_spent: bool = False
    sent_step: int = -1  # the last Optuna step sent (AddTrialMeasurement)
    elapsed: float = 0.0  # the last elapsed_seconds sent
    stopping: bool = False  # evoscaled answered should_stop (the trial is STOPPING)
    completing: bool = False  # claimed by one completion (callback or a later prune)


class EvoscalePruner(BasePruner):
    """An Optuna pruner whose decisions are evoscaled's early stopping (see the module's
    docstring), for any sampler.

    Args:
        target: evoscaled's address ("127.0.0.1:50051") or an evoscale.Client. Default: the
            EvoscaleSampler's client when the study's sampler is one, else 127.0.0.1:50051.
        client: an evoscale.Client (instead of target).
        study_name: the evoscale study's display name; default: the Optuna study's name.
        policy: the study's EarlyStoppingSpec.policy: COST_AWARE (gain per predicted remaining
            core-second; needs max_step), ASHA or MEDIAN.
        max_step: the step of a full run (the last step a trial that runs to its end
            reports); COST_AWARE needs it, ASHA's rungs stop below it.
        budget_core_seconds: the study's budget (0: none). Once evoscaled's trials have spent
            it, every new trial is pruned at its first report.
        min_resource, reduction_factor: the first rung and the factor between rungs (ASHA,
            COST_AWARE).
        min_trials: other trials with a value at a step before a decision there (0: the
            server's default, 3).
        client_id_prefix: the evoscale trials' client ids are PREFIX-NUMBER (the Optuna trial's
            number); default: the client's client_id.
    """

    def __init__(
        self,
        target: str | Client | None = None,
        *,
        client: Client | None = None,
        study_name: str | None = None,
        policy: str = "COST_AWARE",
        max_step: int | None = None,
        budget_core_seconds: float = 0.0,
        min_resource: int = 1,
        reduction_factor: float = 3.0,
        min_trials: int = 0,
        client_id_prefix: str | None = None,
    ) -> None:
        if client is not None and target is not None:
            raise ValueError("target, client: give one of them, not both")
        if isinstance(target, Client):
            target, client = None, target
        if target is not None and not (isinstance(target, str) and target):
            raise ValueError(
                f'target: want an address such as "127.0.0.1:50051" or an evoscale.Client, '
                f"got {target!r}"
            )
        if client is not None and not isinstance(client, Client):
            raise ValueError(f"client: want an evoscale.Client, got {type(client).__name__}")
        if not isinstance(policy, str) or policy.upper() not in _POLICIES:
            raise ValueError(f"policy: unknown policy {policy!r} (known: {', '.join(_POLICIES)})")
        policy = policy.upper()
        if max_step is not None and (not _is_int(max_step) or max_step < 1):
            raise ValueError(f"max_step: want an int >= 1 (a full run's step), got {max_step!r}")
        if policy == "COST_AWARE" and max_step is None:
            raise ValueError("max_step: COST_AWARE needs the step of a full run (an int >= 1)")
        if not _is_number(budget_core_seconds) or budget_core_seconds < 0:
            raise ValueError(
                f"budget_core_seconds: want a finite number >= 0 (0: no budget), "
                f"got {budget_core_seconds!r}"
            )
        if not _is_int(min_resource) or min_resource < 1:
            raise ValueError(f"min_resource: want an int >= 1, got {min_resource!r}")
        if not _is_number(reduction_factor) or reduction_factor <= 1:
            raise ValueError(
                f"reduction_factor: want a finite number > 1, got {reduction_factor!r}"
            )
        if not _is_int(min_trials) or min_trials < 0:
            raise ValueError(
                f"min_trials: want an int >= 0 (0: the server's default, 3), got {min_trials!r}"
            )
        self._address = target
        self._client = client
        self._study_name = study_name
        self._policy = policy
        self._max_step = max_step or 0
        self._budget = float(budget_core_seconds)
        self._min_resource = min_resource
        self._reduction_factor = float(reduction_factor)
        self._min_trials = min_trials
        self._client_id_prefix = client_id_prefix
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._own_study: Study | None = None  # made by the pruner (without EvoscaleSampler)
        self._own_codecs: dict[str, _Codec] = {}
        self._tracked: dict[int, _Tracked] = {}  # Optuna trial id -> what is known of it
        self._said: set[str] = set()  # warnings given once

    # ---- Public ---------------------------------------------------------------------------

    @property
    def evoscale_study(self) -> Study | None:
        """The evoscale study this pruner created (None while none was made, and when the study
        is an EvoscaleSampler's: see its evoscale_study)."""
        return self._own_study

    def prune(self, study: OptunaStudy, trial: FrozenTrial) -> bool:
        self._complete_finished(study, skip=trial._trial_id)
        sampler = study.sampler if isinstance(study.sampler, EvoscaleSampler) else None
        if sampler is not None:
            sampler._attach(self)
        values = _finite_values(trial)
        if not values:
            return False  # nothing to decide on yet
        with self._lock:
            tracked = self._tracked.get(trial._trial_id)
        if tracked is None:
            tracked = self._track(study, sampler, trial)
            if tracked is None:
                return False  # no evoscale study yet (EvoscaleSampler makes it later)
        if tracked.budget_spent:
            return True
        evo = tracked.evo
        if evo is None:
            return False
        try:
            self._send(study, trial, tracked, values, _elapsed(trial))
            if evo.should_stop():
                tracked.stopping = True
        except EvoscaleError as e:
            self._warn_once(
                f"report:{trial.number}",
                f"evoscale: trial {trial.number} ({evo.name}): no decision from evoscaled: {e}",
            )
            return False
        return tracked.stopping

    def callback(self, study: OptunaStudy, trial: FrozenTrial) -> None:
        """For study.optimize(callbacks=[pruner.callback]): completes the evoscale trials of the
        Optuna trials that have ended (`trial` among them) now, rather than at the next prune."""
        self._complete_finished(study)

    # ---- The evoscale study and trials -----------------------------------------------------

    def _configure(self, spec: study_pb2.StudySpec) -> None:
        """Sets the early stopping and budget of `spec` (also EvoscaleSampler's)."""
        es = spec.early_stopping
        es.policy = study_pb2.EarlyStoppingSpec.Policy.Value(self._policy)
        es.max_step = self._max_step
        es.min_resource = self._min_resource
        es.reduction_factor = self._reduction_factor
        es.min_trials = self._min_trials
        spec.budget_core_seconds = self._budget

    def _get_client(self) -> Client:
        """Holds _lock."""
        if self._client is None:
            self._client = Client(self._address or "127.0.0.1:50051")
        return self._client

    def _space(
        self, study: OptunaStudy, sampler: EvoscaleSampler | None, trial: FrozenTrial
    ) -> tuple[Study, dict[str, _Codec]] | None:
        """The evoscale study for `trial` and its parameters: the EvoscaleSampler's, else this
        pruner's own, made now over the trial's distributions (get-or-create by display name)."""
        if sampler is not None:
            made = sampler._space()
            if made is not None:
                self._check_spec(made[0])
            return made
        with self._lock:
            if self._own_study is None:
                space = {n: d for n, d in trial.distributions.items() if not d.single()}
                if not space:
                    self._warn_once(
                        "space",
                        f"evoscale: trial {trial.number} has no parameters to tune; evoscaled "
                        "needs one, so the pruner decides nothing until a trial has one",
                    )
                    return None
                codecs = {name: _codec(name, space[name]) for name in sorted(space)}
                spec = study_pb2.StudySpec()
                goal = "MAXIMIZE" if study.direction == StudyDirection.MAXIMIZE else "MINIMIZE"
                spec.metrics.add(name="value", goal=study_pb2.MetricSpec.Goal.Value(goal))
                spec.parameters.extend(c.spec for c in codecs.values())
                self._configure(spec)
                client = self._get_client()
                self._own_study = client.create_study(self._study_name or study.study_name, spec)
                self._own_codecs = codecs
            return self._own_study, self._own_codecs

    def _check_spec(self, evo_study: Study) -> None:
        es = evo_study.spec.early_stopping
        policy = study_pb2.EarlyStoppingSpec.Policy.Name(es.policy)
        if policy != self._policy and not (
            self._policy == "COST_AWARE" and es.policy == 0 and evo_study.spec.budget_core_seconds
        ):
            self._warn_once(
                "spec",
                f"evoscale study {evo_study.name} (made by EvoscaleSampler) has early_stopping "
                f"policy {policy}, not {self._policy}: the pruner's decisions follow the study's",
            )

    def _track(
        self, study: OptunaStudy, sampler: EvoscaleSampler | None, trial: FrozenTrial
    ) -> _Tracked | None:
        """Finds or makes the evoscale trial of a running Optuna trial."""
        name = trial.system_attrs.get(TRIAL_ATTR)
        if name is not None:
            # Asked from evoscaled by EvoscaleSampler, which completes it.
            if sampler is not None:
                client = sampler.client
            else:
                with self._lock:
                    client = self._get_client()
            tracked = _Tracked(evo=Trial(client, study_pb2.Trial(name=name), ("value",)))
        else:
            made = self._space(study, sampler, trial)
            if made is None:
                return None
            evo_study, codecs = made
            tracked = self._create_trial(study, evo_study, codecs, trial)
        with self._lock:
            return self._tracked.setdefault(trial._trial_id, tracked)

    def _create_trial(
        self,
        study: OptunaStudy,
        evo_study: Study,
        codecs: dict[str, _Codec],
        trial: FrozenTrial,
    ) -> _Tracked:
        params = {}
        for name, codec in codecs.items():
            if trial.distributions.get(name) != codec.distribution:
                _logger.debug(
                    f"evoscale: trial {trial.number} is not in the evoscale study's space; "
                    "the pruner decides nothing for it"
                )
                return _Tracked()
            params[name] = codec.to_evoscale(trial.params[name])
        prefix = self._client_id_prefix or evo_study.client.client_id
        try:
            evo = evo_study.create_trial(
                params, active=True, client_id=f"{prefix}-{trial.number}"
            )
        except FailedPreconditionError as e:
            if "budget_core_seconds" in str(e):
                self._warn_once(
                    "budget",
                    f"evoscale study {evo_study.name} has spent its budget_core_seconds="
                    f"{evo_study.spec.budget_core_seconds:g}: new trials are pruned at their "
                    "first report",
                )
                return _Tracked(budget_spent=True)
            self._warn_once("create", f"evoscale: no evoscale trial for the trials from now: {e}")
            return _Tracked()
        except EvoscaleError as e:
            self._warn_once(f"create:{trial.number}", f"evoscale: trial {trial.number}: {e}")
            return _Tracked()
        study._storage.set_trial_system_attr(trial._trial_id, TRIAL_ATTR, evo.name)
        return _Tracked(evo=evo, evo_study=evo_study)

    def _send(
        self,
        study: OptunaStudy | None,
        trial: FrozenTrial,
        tracked: _Tracked,
        values: list[tuple[int, float]],
        elapsed: float,
    ) -> None:
        """Sends the intermediate values not sent yet, at `elapsed` seconds since the trial's
        start (never less than sent before); records the last step sent in the trial's system
        attrs while it runs (`study` given), so EvoscaleSampler does not send them again."""
        assert tracked.evo is not None
        new = [(step, value) for step, value in values if step > tracked.sent_step]
        if not new:
            return
        elapsed = max(tracked.elapsed, elapsed)
        for step, value in new:
            tracked.evo.report(step, {"value": value}, elapsed_seconds=elapsed)
            tracked.sent_step, tracked.elapsed = step, elapsed
        if study is not None:
            study._storage.set_trial_system_attr(trial._trial_id, REPORTED_ATTR, tracked.sent_step)

    # ---- Completion -----------------------------------------------------------------------

    def _complete_finished(self, study: OptunaStudy, skip: int | None = None) -> None:
        """Completes the evoscale trials (those the pruner made) of the Optuna trials that have
        ended, and forgets every ended trial. Each is claimed once, so it is idempotent and
        safe from several threads."""
        with self._lock:
            pending = [(tid, t) for tid, t in self._tracked.items() if tid != skip]
        for trial_id, tracked in pending:
            frozen = study._storage.get_trial(trial_id)
            if not frozen.state.is_finished():
                continue
            with self._lock:
                if tracked.completing:
                    continue
                tracked.completing = True
                self._tracked.pop(trial_id, None)
            if tracked.evo_study is not None:
                try:
                    self._complete(frozen, tracked)
                except EvoscaleError as e:
                    _warn_not_recorded(frozen, e)

    def _complete(self, trial: FrozenTrial, tracked: _Tracked) -> None:
        evo, evo_study = tracked.evo, tracked.evo_study
        assert evo is not None and evo_study is not None
        duration = _duration(trial)
        self._send(None, trial, tracked, _finite_values(trial), duration)
        state = trial.state
        if state == TrialState.COMPLETE:
            value = trial.value
            if value is None or not math.isfinite(value):
                evo_study.tell(evo, infeasible=f"objective value {value} is not finite")
            else:
                elapsed = max(tracked.elapsed, duration)
                evo_study.tell(evo, {"value": float(value)}, elapsed_seconds=elapsed)
        elif state == TrialState.PRUNED:
            if tracked.sent_step < 0:
                evo_study.tell(evo, infeasible="pruned before reporting a value")
            else:
                if not tracked.stopping:
                    evo.stop()
                evo_study.tell(evo)  # STOPPED, its last measurement final
        else:
            evo_study.tell(evo, infeasible=_fail_reason(trial, state))

    def _warn_once(self, key: str, message: str) -> None:
        with self._lock:
            if key in self._said:
                return
            self._said.add(key)
        _logger.warning(message)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    )


def _finite_values(trial: FrozenTrial) -> list[tuple[int, float]]:
    return [
        (step, float(value))
        for step, value in sorted(trial.intermediate_values.items())
        if math.isfinite(value)
    ]


def _duration(trial: FrozenTrial) -> float:
    if trial.datetime_start is None or trial.datetime_complete is None:
        return _elapsed(trial)
    return max(0.0, (trial.datetime_complete - trial.datetime_start).total_seconds())
