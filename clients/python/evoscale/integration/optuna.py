"""EvoscaleSampler: an Optuna sampler whose suggestions come from an evoscaled study.

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
max_trials is spent, later trials are drawn at random and not mirrored (a warning says so).
Failures of the mirroring calls are logged as warnings and do not stop the optimization; a
failure to create the study (e.g. ALREADY_EXISTS: the display name holds another spec) does.
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

    @property
    def client(self) -> Client:
        return self._client

    @property
    def evoscale_study(self) -> Study | None:
        """The evoscale study, once the first trials have defined the search space."""
        return self._study

    def reseed_rng(self) -> None:
        self._random.reseed_rng()

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
                    _logger.warning(
                        f"evoscale study {self._study.name} has spent its max_trials="
                        f"{self._max_trials}; later trials are drawn at random and not mirrored"
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
        reported = 0
        for step, metrics in self._intermediate(trial):
            evo.report(step, metrics, elapsed_seconds=0.0)
            reported += 1
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
