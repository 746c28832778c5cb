"""evoscale.integration.optuna.EvoscaleSampler: Optuna scripts whose only change is the sampler."""

from __future__ import annotations

import math

import optuna
import pytest

from evoscale.integration.optuna import TRIAL_ATTR, EvoscaleSampler

optuna.logging.set_verbosity(optuna.logging.WARNING)


def mixed_objective(trial: optuna.Trial) -> float:
    """Six parameters (two floats, one log; two ints; two categoricals); 0 at lr=10^-2.5,
    dropout=0.2, layers=3, units=128, adam, gelu."""
    lr = trial.suggest_float("lr", 1e-5, 1.0, log=True)
    dropout = trial.suggest_float("dropout", 0.0, 0.5)
    layers = trial.suggest_int("layers", 1, 6)
    units = trial.suggest_int("units", 16, 512, log=True)
    optimizer = trial.suggest_categorical("optimizer", ["adam", "sgd", "rmsprop"])
    activation = trial.suggest_categorical("activation", ["relu", "tanh", "gelu"])
    return (
        (math.log10(lr) + 2.5) ** 2
        + 4 * (dropout - 0.2) ** 2
        + 0.1 * abs(layers - 3)
        + 0.1 * abs(math.log2(units) - 7)
        + {"adam": 0.0, "sgd": 0.3, "rmsprop": 0.1}[optimizer]
        + {"gelu": 0.0, "relu": 0.05, "tanh": 0.2}[activation]
    )


def evoscale_trials_by_optuna_number(study: optuna.Study, sampler: EvoscaleSampler):
    evo = {t.name: t for t in sampler.evoscale_study.trials}
    return {
        t.number: evo[t.system_attrs[TRIAL_ATTR]]
        for t in study.trials
        if TRIAL_ATTR in t.system_attrs
    }


def test_every_optuna_trial_is_visible_in_evoscaled_with_its_value(evoscaled):
    sampler = EvoscaleSampler(evoscaled.address, seed=3)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed_objective, n_trials=30)

    evo_study = sampler.evoscale_study
    assert evo_study.display_name == study.study_name
    assert [p.name for p in evo_study.spec.parameters] == sorted(study.best_params)
    evo_trials = evo_study.trials
    assert len(evo_trials) == 30
    assert {t.state for t in evo_trials} == {"SUCCEEDED"}
    by_number = evoscale_trials_by_optuna_number(study, sampler)
    assert sorted(by_number) == list(range(30))  # every trial carries its evoscale name
    for trial in study.trials:
        evo = by_number[trial.number]
        assert evo.final_metrics == {"value": trial.value}
        params = evo.params
        assert params["optimizer"] == trial.params["optimizer"]
        assert params["layers"] == trial.params["layers"]
        assert params["lr"] == pytest.approx(trial.params["lr"], rel=1e-12)
    # Trials after the first come from evoscaled; the first is mirrored.
    suffixes = [t.client_id.rsplit("-", 1)[-1] for t in evo_trials[1:]]
    assert suffixes == [str(n) for n in range(1, 30)]
    assert study.best_value == min(t.final_metrics["value"] for t in evo_trials)
    assert [t.final_metrics["value"] for t in evo_study.best_trials] == [study.best_value]


def test_pruned_trials_are_stopped_in_evoscaled_with_their_last_value(evoscaled):
    steps = 5

    def objective(trial: optuna.Trial) -> float:
        final = mixed_objective(trial)
        for step in range(steps):
            trial.report(final * (1 + (steps - 1 - step) / steps), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return final

    # Six random startup trials (mirrored with CreateTrial when they end), then evoscale's.
    sampler = EvoscaleSampler(evoscaled.address, seed=5, n_startup_trials=6)
    pruner = optuna.pruners.MedianPruner(n_startup_trials=3, n_warmup_steps=1)
    study = optuna.create_study(sampler=sampler, pruner=pruner)
    study.optimize(objective, n_trials=20)

    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "the pruner pruned nothing"
    by_number = evoscale_trials_by_optuna_number(study, sampler)
    assert len(by_number) == 20 == len(sampler.evoscale_study.trials)
    for trial in study.trials:
        evo = by_number[trial.number]
        reported = sorted(trial.intermediate_values.items())
        # Suggested or mirrored, every trial carries its intermediate values.
        assert [(m.step, m.metrics["value"]) for m in evo.measurements] == reported
        if trial.state == optuna.trial.TrialState.PRUNED:
            assert evo.state == "STOPPED"
            assert evo.final_metrics == {"value": reported[-1][1]}
        else:
            assert evo.state == "SUCCEEDED"
            assert evo.final_metrics == {"value": trial.value}
    assert {t.state for t in sampler.evoscale_study.best_trials} == {"SUCCEEDED"}
    # Pruned startup trials too end STOPPED (created so, in one call).
    assert any(t.state == optuna.trial.TrialState.PRUNED for t in study.trials[3:6])


def test_failed_trials_are_infeasible_even_before_the_study_exists(evoscaled):
    def objective(trial: optuna.Trial) -> float:
        value = mixed_objective(trial)
        if trial.number in (0, 4):
            raise ValueError("diverged")
        return value

    sampler = EvoscaleSampler(evoscaled.address, seed=7)
    study = optuna.create_study(sampler=sampler)
    study.optimize(objective, n_trials=6, catch=(ValueError,))

    states = [t.state for t in sampler.evoscale_study.trials]
    assert sorted(states) == ["INFEASIBLE"] * 2 + ["SUCCEEDED"] * 4
    # Trial 0 failed before the study existed: mirrored (first) when trial 1 created it.
    first = sampler.evoscale_study.trials[0]
    assert first.state == "INFEASIBLE"
    assert first.params["lr"] == pytest.approx(study.trials[0].params["lr"], rel=1e-12)
    assert by_state(study, sampler, 4) == "INFEASIBLE"


def by_state(study: optuna.Study, sampler: EvoscaleSampler, number: int) -> str:
    return evoscale_trials_by_optuna_number(study, sampler)[number].state


def test_maximize_and_step_distributions_map_to_the_spec(evoscaled):
    def objective(trial: optuna.Trial) -> float:
        x = trial.suggest_float("x", 0.0, 1.0, step=0.25)
        k = trial.suggest_int("k", 0, 10, step=2)
        flag = trial.suggest_categorical("flag", [True, False, None])
        trial.suggest_int("fixed", 3, 3)  # single-valued: left out of the spec
        return x + k + (flag is True)

    sampler = EvoscaleSampler(evoscaled.address, seed=1)
    study = optuna.create_study(sampler=sampler, direction="maximize")
    study.optimize(objective, n_trials=12)

    spec = sampler.evoscale_study.spec
    assert [m.name for m in spec.metrics] == ["value"]
    assert spec.metrics[0].goal == spec.metrics[0].MAXIMIZE
    params = {p.name: p for p in spec.parameters}
    assert sorted(params) == ["flag", "k", "x"]
    assert list(params["x"].discrete_spec.values) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert list(params["k"].discrete_spec.values) == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert list(params["flag"].categorical_spec.values) == ["True", "False", "None"]
    for trial in study.trials:
        assert trial.params["x"] in (0.0, 0.25, 0.5, 0.75, 1.0)
        assert trial.params["k"] in range(0, 11, 2) and isinstance(trial.params["k"], int)
        assert trial.params["flag"] in (True, False, None)
    assert len(sampler.evoscale_study.trials) == 12


def test_startup_trials_are_mirrored_with_their_names(evoscaled):
    sampler = EvoscaleSampler(evoscaled.address, seed=6, n_startup_trials=4)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed_objective, n_trials=8)
    by_number = evoscale_trials_by_optuna_number(study, sampler)
    assert sorted(by_number) == list(range(8))
    # The first four were drawn at random and created in evoscaled; then evoscaled suggests.
    client_id = sampler.client.client_id
    assert [by_number[n].client_id for n in range(8)] == [client_id] * 4 + [
        f"{client_id}-{n}" for n in range(4, 8)
    ]


def test_threads_of_one_process_never_share_an_evoscale_trial(evoscaled):
    sampler = EvoscaleSampler(evoscaled.address, seed=8)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed_objective, n_trials=24, n_jobs=4)
    names = [t.system_attrs[TRIAL_ATTR] for t in study.trials]
    assert len(set(names)) == 24
    evo_trials = sampler.evoscale_study.trials
    assert len(evo_trials) == 24 and {t.state for t in evo_trials} == {"SUCCEEDED"}


def test_enqueued_trials_keep_their_values_and_are_mirrored(evoscaled):
    sampler = EvoscaleSampler(evoscaled.address, seed=9)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed_objective, n_trials=3)
    study.enqueue_trial({"lr": 0.0123, "optimizer": "sgd"})
    study.optimize(mixed_objective, n_trials=2)
    enqueued = study.trials[3]
    assert (enqueued.params["lr"], enqueued.params["optimizer"]) == (0.0123, "sgd")
    evo = evoscale_trials_by_optuna_number(study, sampler)[3]
    assert (evo.params["lr"], evo.params["optimizer"]) == (0.0123, "sgd")
    assert evo.client_id == sampler.client.client_id  # created, not suggested
    assert evo.final_metrics == {"value": enqueued.value}
    assert len(sampler.evoscale_study.trials) == 5


@pytest.mark.server_v3
def test_two_optuna_studies_with_one_study_name_share_the_evoscale_study(evoscaled, display_name):
    first = EvoscaleSampler(evoscaled.address, study_name=display_name, seed=2)
    optuna.create_study(sampler=first).optimize(mixed_objective, n_trials=6)
    second = EvoscaleSampler(evoscaled.address, study_name=display_name, seed=2)
    optuna.create_study(sampler=second).optimize(mixed_objective, n_trials=6)
    assert second.evoscale_study.name == first.evoscale_study.name
    assert len(second.evoscale_study.trials) == 12


def test_after_max_trials_optuna_goes_on_at_random(evoscaled):
    sampler = EvoscaleSampler(evoscaled.address, seed=4, max_trials=5)
    study = optuna.create_study(sampler=sampler)
    study.optimize(mixed_objective, n_trials=8)
    assert len(study.trials) == 8
    assert len(sampler.evoscale_study.trials) == 5
    assert sampler.evoscale_study.state == "COMPLETED"


def test_unknown_algorithm_is_a_value_error():
    with pytest.raises(ValueError, match='unknown algorithm "GENETICS"'):
        EvoscaleSampler("127.0.0.1:1", algorithm="GENETICS")
