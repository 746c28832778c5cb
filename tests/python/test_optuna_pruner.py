"""evoscale.integration.optuna.EvoscalePruner: evoscaled's early stopping for any Optuna sampler.

Every test runs against the real evoscaled (conftest.py starts one on port 0)."""

from __future__ import annotations

import math
import time

import optuna
import pytest

import evoscale
from evoscale.integration.optuna import TRIAL_ATTR, EvoscalePruner, EvoscaleSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)

STEPS = 10  # steps 0..9: a full run's last step is 9
PRUNED = optuna.trial.TrialState.PRUNED
COMPLETE = optuna.trial.TrialState.COMPLETE


def is_bad(params: dict) -> bool:
    return params["optimizer"] == "broken" or params["x"] > 0.8


def learning_curve(trial: optuna.Trial, sleep_s: float = 0.0) -> float:
    """A loss that falls as 1/(step+1); a broken optimizer or x above 0.8 adds 3 at every step
    (clearly bad). Good configurations share one curve, so none ranks above another and ASHA
    never stops one."""
    x = trial.suggest_float("x", 0.0, 1.0)
    optimizer = trial.suggest_categorical("optimizer", ["adam", "sgd", "broken"])
    offset = 3.0 if is_bad({"x": x, "optimizer": optimizer}) else 0.0
    value = math.inf
    for step in range(STEPS):
        if sleep_s:
            time.sleep(sleep_s)
        value = offset + 1.0 / (step + 1)
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


def enqueue_good(study: optuna.Study, count: int = 3) -> None:
    """Known-good configurations first, so that the first rungs hold good trials."""
    for i in range(count):
        study.enqueue_trial({"x": 0.1 * (i + 1), "optimizer": "adam"})


def twins(study: optuna.Study, evo_study: evoscale.Study) -> dict[int, evoscale.Trial]:
    """The evoscale trial of each Optuna trial that has one, by the Optuna trial's number."""
    evo = {t.name: t for t in evo_study.trials}
    return {
        t.number: evo[t.system_attrs[TRIAL_ATTR]]
        for t in study.trials
        if TRIAL_ATTR in t.system_attrs
    }


def assert_measurements_mirror(trial: optuna.trial.FrozenTrial, evo: evoscale.Trial) -> None:
    assert [(m.step, m.metrics["value"]) for m in evo.measurements] == sorted(
        trial.intermediate_values.items()
    )
    elapsed = [m.elapsed_seconds for m in evo.measurements]
    assert elapsed == sorted(elapsed) and elapsed[0] > 0


def test_asha_with_tpe_stops_the_bad_configurations(evoscaled, display_name):
    pruner = EvoscalePruner(
        evoscaled.address, study_name=display_name, policy="ASHA", max_step=STEPS - 1
    )
    sampler = optuna.samplers.TPESampler(seed=11, n_startup_trials=8)
    study = optuna.create_study(sampler=sampler, pruner=pruner)
    enqueue_good(study)
    study.optimize(learning_curve, n_trials=24, callbacks=[pruner.callback])

    evo_study = pruner.evoscale_study
    assert evo_study is not None and evo_study.display_name == display_name
    spec = evo_study.spec
    assert spec.early_stopping.policy == spec.early_stopping.ASHA
    assert spec.early_stopping.max_step == STEPS - 1
    assert [p.name for p in spec.parameters] == ["optimizer", "x"]
    assert spec.metrics[0].name == "value" and spec.metrics[0].goal == spec.metrics[0].MINIMIZE

    by_number = twins(study, evo_study)
    assert sorted(by_number) == list(range(24)) and len(evo_study.trials) == 24
    bad = [t for t in study.trials if is_bad(t.params)]
    assert bad, "TPE drew no bad configuration"
    for trial in study.trials:
        evo = by_number[trial.number]
        assert evo.client_id == f"{pruner.evoscale_study.client.client_id}-{trial.number}"
        assert evo.params["optimizer"] == trial.params["optimizer"]
        assert evo.params["x"] == pytest.approx(trial.params["x"], rel=1e-12)
        assert_measurements_mirror(trial, evo)
        if is_bad(trial.params):
            # Stopped at the first rung (step 1), as evoscaled decided.
            assert trial.state == PRUNED and max(trial.intermediate_values) == 1
            assert evo.state == "STOPPED"
            assert evo.final_metrics == {"value": trial.intermediate_values[1]}
        else:
            assert trial.state == COMPLETE and evo.state == "SUCCEEDED"
            assert evo.final_metrics == {"value": trial.value}
            assert len(evo.measurements) == STEPS
    assert study.best_value == pytest.approx(1.0 / STEPS)


def assert_budget_spent(evo_study):
    """The study's budget is spent as evoscaled counts it: its trials spent it, or what is left
    would not pay for its cheapest full (SUCCEEDED) run that reported its time."""
    budget = evo_study.spec.budget_core_seconds
    full = [t.proto.core_seconds for t in evo_study.trials
            if t.state == "SUCCEEDED" and t.proto.core_seconds > 0]
    left = evo_study.remaining_core_seconds
    assert evo_study.spent_core_seconds >= budget or (full and left < min(full)), (
        evo_study.spent_core_seconds, left, full)


def test_cost_aware_budget_prunes_new_trials_once_spent(evoscaled, display_name):
    budget = 1.0  # a full run is about 10 x 0.02 s
    pruner = EvoscalePruner(
        evoscaled.address,
        study_name=display_name,
        max_step=STEPS - 1,  # policy COST_AWARE, the default
        budget_core_seconds=budget,
    )
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=3), pruner=pruner)
    study.optimize(
        lambda t: learning_curve(t, sleep_s=0.02), n_trials=20, callbacks=[pruner.callback]
    )

    evo_study = pruner.evoscale_study
    assert evo_study.spec.budget_core_seconds == budget
    assert evo_study.spec.early_stopping.policy == evo_study.spec.early_stopping.COST_AWARE
    assert_budget_spent(evo_study)
    by_number = twins(study, evo_study)
    count = len(by_number)
    assert 2 <= count < 20
    assert len(evo_study.trials) == count
    # The trial count stopped growing: the trials with an evoscale twin come first; every
    # later one was pruned at its first report.
    assert sorted(by_number) == list(range(count))
    for trial in study.trials[count:]:
        assert trial.state == PRUNED and list(trial.intermediate_values) == [0]
    for trial in study.trials[:count]:
        evo = by_number[trial.number]
        assert_measurements_mirror(trial, evo)
        assert evo.state == ("SUCCEEDED" if trial.state == COMPLETE else "STOPPED")
    # Spent = the sum of each twin's latest elapsed_seconds (1 core each).
    spent = sum(max(m.elapsed_seconds for m in t.measurements + [t.proto.final_measurement])
                for t in evo_study.trials)
    assert evo_study.spent_core_seconds == pytest.approx(spent, rel=1e-9)
    # A new Optuna study joining the spent evoscale study is pruned from its first report.
    again = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=4),
        pruner=EvoscalePruner(
            evoscaled.address, study_name=display_name, max_step=STEPS - 1,
            budget_core_seconds=budget,
        ),
    )
    again.optimize(learning_curve, n_trials=2)
    assert [t.state for t in again.trials] == [PRUNED, PRUNED]
    assert len(evo_study.trials) == count


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        ({"max_step": 0}, "max_step"),
        ({}, "max_step"),  # COST_AWARE without it
        ({"max_step": 5, "budget_core_seconds": -1.0}, "budget_core_seconds"),
        ({"max_step": 5, "budget_core_seconds": math.nan}, "budget_core_seconds"),
        ({"max_step": 5, "budget_core_seconds": math.inf}, "budget_core_seconds"),
        ({"policy": "HYPERBAND", "max_step": 5}, "policy"),
        ({"policy": "ASHA", "min_resource": 0}, "min_resource"),
        ({"policy": "ASHA", "reduction_factor": 1.0}, "reduction_factor"),
        ({"policy": "MEDIAN", "min_trials": -1}, "min_trials"),
        ({"policy": "ASHA", "client": evoscale.Client("127.0.0.1:1")}, "target, client"),
    ],
)
def test_bad_arguments_are_value_errors_naming_the_argument(kwargs, argument):
    with pytest.raises(ValueError, match=f"^{argument}: "):
        EvoscalePruner("127.0.0.1:1", **kwargs)


def test_policies_are_accepted_and_target_may_be_a_client():
    client = evoscale.Client("127.0.0.1:1")
    EvoscalePruner(client, policy="ASHA")
    EvoscalePruner(client=client, policy="median", max_step=3)
    EvoscalePruner(max_step=1)  # COST_AWARE; the default address


def test_with_evoscale_sampler_the_pruner_uses_the_sampler_trials(evoscaled, display_name):
    sampler = EvoscaleSampler(evoscaled.address, study_name=display_name, seed=5)
    pruner = EvoscalePruner(policy="ASHA", max_step=STEPS - 1)  # the sampler's client
    study = optuna.create_study(sampler=sampler, pruner=pruner)
    enqueue_good(study)
    study.optimize(learning_curve, n_trials=16)

    assert pruner.evoscale_study is None  # no study of its own
    evo_study = sampler.evoscale_study
    spec = evo_study.spec
    assert spec.early_stopping.policy == spec.early_stopping.ASHA  # the pruner's, in the sampler's
    assert spec.early_stopping.max_step == STEPS - 1
    by_number = twins(study, evo_study)
    assert sorted(by_number) == list(range(16))
    assert len(evo_study.trials) == 16  # no duplicate
    assert len({t.name for t in by_number.values()}) == 16
    client_id = sampler.client.client_id
    # The enqueued ones were created (the first mirrored by the sampler at its end, the next
    # two ACTIVE by the pruner), the rest asked by the sampler.
    assert by_number[0].client_id == client_id
    assert [by_number[n].client_id for n in range(1, 16)] == [
        f"{client_id}-{n}" for n in range(1, 16)
    ]
    assert any(t.state == PRUNED for t in study.trials), "nothing was pruned"
    for trial in study.trials:
        evo = by_number[trial.number]
        # Sent once, whoever sent them (the pruner while it ran, the sampler the rest).
        assert [(m.step, m.metrics["value"]) for m in evo.measurements] == sorted(
            trial.intermediate_values.items()
        )
        if trial.state == PRUNED:
            assert is_bad(trial.params) and evo.state == "STOPPED"
        else:
            assert evo.state == "SUCCEEDED" and evo.final_metrics == {"value": trial.value}
    # Trials the sampler asked for and the pruner stopped carry the pruner's elapsed times.
    stopped = [by_number[t.number] for t in study.trials[3:] if t.state == PRUNED]
    assert stopped and all(t.measurements[0].elapsed_seconds > 0 for t in stopped)


def flat_curve(trial: optuna.Trial) -> float:
    """One curve for every configuration: MEDIAN never stops a trial of it."""
    trial.suggest_float("x", 0.0, 1.0)
    trial.suggest_categorical("optimizer", ["adam", "sgd", "broken"])
    for step in range(STEPS):
        trial.report(1.0 / (step + 1), step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return 1.0 / STEPS


def test_with_evoscale_sampler_the_budget_stops_the_study_growing(evoscaled, display_name):
    sampler = EvoscaleSampler(evoscaled.address, study_name=display_name, seed=6)
    pruner = EvoscalePruner(max_step=STEPS - 1, budget_core_seconds=1.0)
    study = optuna.create_study(sampler=sampler, pruner=pruner)
    study.optimize(lambda t: learning_curve(t, sleep_s=0.02), n_trials=16)

    evo_study = sampler.evoscale_study
    assert evo_study.spec.budget_core_seconds == 1.0
    assert evo_study.spec.early_stopping.policy == evo_study.spec.early_stopping.COST_AWARE
    assert_budget_spent(evo_study)
    count = len(evo_study.trials)
    assert 2 <= count < 16
    by_number = twins(study, evo_study)
    assert sorted(by_number) == list(range(count))  # later ones are neither asked nor mirrored
    for trial in study.trials[count:]:
        assert trial.state == PRUNED and list(trial.intermediate_values) == [0]
    assert {t.state for t in evo_study.trials} <= {"SUCCEEDED", "STOPPED"}


def test_trials_end_lazily_at_the_next_prune_or_at_once_with_the_callback(evoscaled):
    pruner = EvoscalePruner(evoscaled.address, policy="MEDIAN")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=8), pruner=pruner)

    def objective(trial: optuna.Trial) -> float:
        value = flat_curve(trial)
        if trial.number == 2:
            raise ValueError("diverged")
        if trial.number == 3:
            raise optuna.TrialPruned()  # pruned by the objective, not by evoscaled
        return value

    study.optimize(objective, n_trials=5, catch=(ValueError,))
    evo = pruner.evoscale_study.trials
    # Each ended at the next trial's first should_prune(); the last one is still running.
    assert [t.state for t in evo] == ["SUCCEEDED", "SUCCEEDED", "INFEASIBLE", "STOPPED", "ACTIVE"]
    assert "Optuna trial 2 FAIL" in evo[2].infeasible_reason
    assert evo[3].final_metrics == {"value": 1.0 / STEPS}  # its last measurement
    last = study.trials[-1]
    pruner.callback(study, last)
    pruner.callback(study, last)  # idempotent
    evo = pruner.evoscale_study.trials
    assert evo[4].state == "SUCCEEDED" and evo[4].final_metrics == {"value": last.value}
    assert [len(t.measurements) for t in evo] == [STEPS] * 5


def test_threads_share_one_pruner(evoscaled):
    pruner = EvoscalePruner(evoscaled.address, policy="ASHA", min_trials=2)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=2), pruner=pruner)
    study.optimize(learning_curve, n_trials=24, n_jobs=4, callbacks=[pruner.callback])
    by_number = twins(study, pruner.evoscale_study)
    assert sorted(by_number) == list(range(24))
    assert len({t.name for t in by_number.values()}) == 24 == len(pruner.evoscale_study.trials)
    for trial in study.trials:
        evo = by_number[trial.number]
        assert_measurements_mirror(trial, evo)
        assert evo.state == ("SUCCEEDED" if trial.state == COMPLETE else "STOPPED")


def test_sdk_takes_the_budget_and_max_step(client, display_name):
    spec = {
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
        "budget_core_seconds": 2.5,
        "early_stopping": {"policy": "COST_AWARE", "max_step": 7},
    }
    study = client.create_study(display_name, spec)
    assert study.spec.budget_core_seconds == 2.5
    assert study.spec.early_stopping.max_step == 7
    assert study.spent_core_seconds == 0.0 and study.remaining_core_seconds == 2.5
    trial = study.create_trial({"x": 0.5}, active=True, client_id="elsewhere-0")
    assert trial.state == "ACTIVE" and trial.client_id == "elsewhere-0"
    trial.report(0, 1.0, elapsed_seconds=1.5)
    assert study.spent_core_seconds == 1.5 and study.remaining_core_seconds == 1.0
    trial.report(1, 0.5, elapsed_seconds=3.0)
    assert study.remaining_core_seconds == 0.0
    with pytest.raises(evoscale.FailedPreconditionError, match="budget_core_seconds"):
        study.create_trial({"x": 0.25}, active=True)
    with pytest.raises(ValueError, match="^active: "):
        study.create_trial({"x": 0.25}, 1.0, active=True)
    study.tell(trial)
    unbudgeted = client.create_study(display_name + "-free", {**spec, "budget_core_seconds": 0})
    assert unbudgeted.remaining_core_seconds is None
