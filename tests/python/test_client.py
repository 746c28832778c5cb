"""evoscale.Client, Study and Trial against the real evoscaled."""

from __future__ import annotations

import math
from pathlib import Path

import grpc
import pytest

import evoscale

ROOT = Path(__file__).resolve().parents[2]

SPEC = {
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
    "parameters": [
        {"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1}, "scale": "LOG"},
        {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
        {"name": "dim", "discrete_spec": {"values": [8, 16, 32]}},
        {"name": "opt", "categorical_spec": {"values": ["adam", "sgd"]}},
    ],
    "algorithm": {"algorithm": "GENETIC", "seed": 7},
}


def with_changes(**changes: object) -> dict:
    return {**SPEC, **changes}


# ---- Ask and tell ----------------------------------------------------------------------------


def test_ask_gives_typed_params_and_tell_stores_the_value(client, display_name):
    study = client.create_study(display_name, SPEC)
    assert study.name.startswith("studies/")
    assert study.display_name == display_name
    [trial] = study.ask()
    assert trial.state == "ACTIVE"
    assert trial.name.startswith(study.name + "/trials/")
    params = trial.params
    assert set(params) == {"lr", "layers", "dim", "opt"}
    assert isinstance(params["lr"], float) and 1e-4 <= params["lr"] <= 0.1
    assert isinstance(params["layers"], int) and 1 <= params["layers"] <= 4
    assert params["dim"] in (8.0, 16.0, 32.0)
    assert params["opt"] in ("adam", "sgd")
    assert trial.final_metrics is None

    trial.report(1, 0.75)
    trial.report(2, {"loss": 0.5})
    assert [(m.step, m.metrics) for m in trial.measurements] == [
        (1, {"loss": 0.75}),
        (2, {"loss": 0.5}),
    ]
    assert trial.should_stop() is False
    done = study.tell(trial, 0.4321)
    assert done.state == "SUCCEEDED"
    assert done.final_metrics == {"loss": 0.4321}
    assert [t.name for t in study.best_trials] == [trial.name]
    assert study.get_trial(trial.id).final_metrics == {"loss": 0.4321}


def test_ask_again_without_telling_returns_the_same_trials(client, display_name):
    study = client.create_study(display_name, SPEC)
    first = [t.name for t in study.ask(3)]
    assert len(first) == 3
    assert [t.name for t in study.ask(3)] == first
    # Another client id gets other trials.
    assert not {t.name for t in study.ask(2, client_id="other-worker")} & set(first)


def test_tell_infeasible_needs_no_metrics(client, display_name):
    study = client.create_study(display_name, SPEC)
    [trial] = study.ask()
    done = study.tell(trial, infeasible="diverged: loss is NaN")
    assert done.state == "INFEASIBLE"
    assert done.infeasible_reason == "diverged: loss is NaN"
    assert study.best_trials == []


def test_create_trial_adds_a_completed_trial(client, display_name):
    study = client.create_study(display_name, SPEC)
    trial = study.create_trial({"lr": 0.01, "layers": 2, "dim": 16.0, "opt": "sgd"}, {"loss": 0.25})
    assert trial.state == "SUCCEEDED"
    assert trial.params == {"lr": 0.01, "layers": 2, "dim": 16.0, "opt": "sgd"}
    assert [t.name for t in study.trials] == [trial.name]


def test_create_trial_records_stopped_and_infeasible_results(client, display_name):
    study = client.create_study(display_name, SPEC)
    params = {"lr": 0.01, "layers": 2, "dim": 16.0, "opt": "sgd"}
    stopped = study.create_trial(params, stopped=True, measurements=[(1, 0.9), (2, 0.7)])
    assert stopped.state == "STOPPED"
    assert stopped.final_metrics == {"loss": 0.7}
    assert [m.step for m in stopped.measurements] == [1, 2]
    failed = study.create_trial(params, infeasible="diverged")
    assert (failed.state, failed.proto.infeasible_reason) == ("INFEASIBLE", "diverged")
    with pytest.raises(evoscale.InvalidArgumentError, match="a STOPPED trial needs one"):
        study.create_trial(params, stopped=True)


def test_parameter_importance_names_what_explains_the_loss(client, display_name):
    study = client.create_study(display_name, SPEC)
    for i in range(40):
        lr = 10 ** (-4 + 3 * ((i * 7) % 40) / 40)
        layers = 1 + i % 4
        study.create_trial({"lr": lr, "layers": layers, "dim": 8.0, "opt": "adam"},
                           {"loss": (math.log10(lr) + 2.5) ** 2})
    importance = study.parameter_importance()
    assert list(importance)[0] == "lr"
    assert importance["lr"] > 0.9
    assert sum(importance.values()) == pytest.approx(1.0)
    with pytest.raises(evoscale.InvalidArgumentError, match='metric: "auc" is not a metric'):
        study.parameter_importance("auc")


def test_study_budget_spent_ask_returns_empty_and_study_completes(client, display_name):
    study = client.create_study(display_name, with_changes(max_trials=3))
    for trial in study.ask(3):
        study.tell(trial, 1.0)
    assert study.ask() == []
    assert study.state == "COMPLETED"


def test_paused_study_refuses_ask_with_failed_precondition(client, display_name):
    study = client.create_study(display_name, SPEC)
    study.set_state("INACTIVE")
    with pytest.raises(evoscale.FailedPreconditionError, match="INACTIVE"):
        study.ask()
    study.set_state("ACTIVE")
    assert len(study.ask()) == 1


def test_list_and_delete_studies(client, display_name):
    study = client.create_study(display_name, SPEC)
    assert study in client.list_studies()
    assert client.get_study(study.name) == study
    client.delete_study(study)
    with pytest.raises(evoscale.NotFoundError):
        client.get_study(study.name)


# ---- Specs -----------------------------------------------------------------------------------


def test_spec_from_the_cli_example_yaml_file(client, display_name):
    study = client.create_study(display_name, ROOT / "examples" / "study.yaml")
    assert study.display_name == display_name  # the argument wins over the file's
    assert [p.name for p in study.spec.parameters] == [
        "lr_dense", "embedding_dim", "hidden_layers", "optimizer_sparse",
    ]
    assert study.spec.parameters[3].children[0].parameter_spec.name == "ftrl_l1"
    assert study.spec.max_trials == 24


def test_yaml_plain_numbers_in_string_fields_stay_text_as_in_the_cli(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "metrics: [{name: auc, goal: MAXIMIZE}]\n"
        "parameters:\n"
        "  - name: dim\n"
        "    categorical_spec: {values: [32, 64, '0128', yes]}\n"
        "  - name: x\n"
        "    double_spec: {min: 0, max: 1e3}\n"
        "algorithm: {algorithm: GENETIC, settings: {population_size: 12}}\n"
    )
    study = evoscale.study_from_spec("s", path)
    assert list(study.spec.parameters[0].categorical_spec.values) == ["32", "64", "0128", "yes"]
    assert study.spec.parameters[1].double_spec.max == 1000.0
    assert dict(study.spec.algorithm.settings) == {"population_size": "12"}
    # A Python dict reads the same way.
    from_dict = evoscale.study_from_spec(
        "s", {"parameters": [{"name": "d", "categorical_spec": {"values": [32, 64]}}],
              "algorithm": {"settings": {"population_size": 12}}}
    )
    assert list(from_dict.spec.parameters[0].categorical_spec.values) == ["32", "64"]
    assert dict(from_dict.spec.algorithm.settings) == {"population_size": "12"}


def test_spec_from_a_json_study_file_with_metadata(tmp_path: Path):
    path = tmp_path / "s.json"
    path.write_text('{"display_name": "x", "metadata": {"team": "ads"}, "spec": {"maxTrials": 5}}')
    study = evoscale.study_from_spec("y", path)
    assert study.display_name == "y"
    assert study.spec.max_trials == 5
    assert dict(study.metadata) == {"team": "ads"}


def test_unknown_spec_field_is_refused_naming_it(client, display_name):
    with pytest.raises(evoscale.InvalidArgumentError, match='no field named "max_trail"'):
        client.create_study(display_name, with_changes(max_trail=3))


def test_bad_yaml_file_names_the_file_and_line(tmp_path: Path):
    path = tmp_path / "bad.yaml"
    path.write_text("metrics: [{name: a}]\nmetrics: []\n")
    message = r'bad.yaml": line 2, column 1: key "metrics" given twice'
    with pytest.raises(evoscale.InvalidArgumentError, match=message):
        evoscale.study_from_spec("s", path)


# ---- Errors from the server --------------------------------------------------------------------


def test_min_above_max_is_invalid_argument_naming_the_field(client, display_name):
    spec = with_changes(parameters=[{"name": "lr", "double_spec": {"min": 0.1, "max": 0.01}}])
    with pytest.raises(evoscale.InvalidArgumentError) as raised:
        client.create_study(display_name, spec)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "study.spec.parameters[0].double_spec" in str(raised.value)
    assert "min" in str(raised.value)
    assert isinstance(raised.value, ValueError)
    assert client.list_studies(display_name=display_name) == []


def test_tell_with_a_metric_not_in_the_study_names_the_missing_one(client, display_name):
    study = client.create_study(display_name, SPEC)
    [trial] = study.ask()
    with pytest.raises(evoscale.InvalidArgumentError) as raised:
        study.tell(trial, {"accuracy": 0.9})
    assert 'final_measurement.metrics: missing metric "loss"' in str(raised.value)
    assert study.get_trial(trial.id).state == "ACTIVE"


def test_one_number_for_a_two_metric_study_is_a_value_error(client, display_name):
    spec = with_changes(
        metrics=[{"name": "auc", "goal": "MAXIMIZE"}, {"name": "ms", "goal": "MINIMIZE"}]
    )
    study = client.create_study(display_name, spec)
    [trial] = study.ask()
    with pytest.raises(ValueError, match=r"\['auc', 'ms'\]"):
        study.tell(trial, 0.5)


def test_unknown_study_and_trial_are_not_found(client):
    with pytest.raises(evoscale.NotFoundError, match="studies/987654") as raised:
        client.get_study("studies/987654")
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(evoscale.NotFoundError):
        client.get_trial("studies/987654/trials/1")


def test_completing_twice_is_failed_precondition(client, display_name):
    study = client.create_study(display_name, SPEC)
    [trial] = study.ask()
    study.tell(trial, 1.0)
    with pytest.raises(evoscale.FailedPreconditionError, match="already SUCCEEDED"):
        study.tell(trial, 2.0)


def test_unreachable_server_is_unavailable():
    with evoscale.Client("127.0.0.1:1", timeout=10) as unreachable:
        with pytest.raises(evoscale.UnavailableError):
            unreachable.list_studies()


def test_token_is_sent_as_bearer_metadata(start_evoscaled, tmp_path: Path):
    tokens = tmp_path / "tokens"
    tokens.write_text("writer-token-0123456789 writer\n")
    server = start_evoscaled("--auth-tokens", str(tokens))
    with evoscale.Client(server.address) as anonymous:
        with pytest.raises(evoscale.UnauthenticatedError, match="authorization"):
            anonymous.list_studies()
    with evoscale.Client(server.address, token="wrong-token-0123456789") as wrong:
        with pytest.raises(evoscale.UnauthenticatedError, match="unknown token"):
            wrong.list_studies()
    with evoscale.Client(server.address, token="writer-token-0123456789") as writer:
        study = writer.create_study("with-token", SPEC)
        assert len(study.ask()) == 1


# ---- Wave 3: get-or-create, STOPPED, metadata, DeleteTrial --------------------------------------


@pytest.mark.server_v3
def test_create_study_is_get_or_create_by_display_name(client, display_name):
    first = client.create_study(display_name, SPEC)
    assert client.create_study(display_name, SPEC).name == first.name
    with pytest.raises(evoscale.AlreadyExistsError, match="max_trials") as raised:
        client.create_study(display_name, with_changes(max_trials=10))
    assert first.name in str(raised.value)
    assert [s.name for s in client.list_studies(display_name=display_name)] == [first.name]


@pytest.mark.server_v3
def test_load_if_exists_false_raises_duplicated_study(client, display_name):
    study = client.create_study(display_name, SPEC, load_if_exists=False)
    with pytest.raises(evoscale.DuplicatedStudyError, match=study.name) as raised:
        client.create_study(display_name, SPEC, load_if_exists=False)
    assert isinstance(raised.value, evoscale.AlreadyExistsError)


@pytest.mark.server_v3
def test_list_studies_by_display_name(client, display_name):
    a = client.create_study(display_name + "-a", SPEC)
    client.create_study(display_name + "-b", SPEC)
    assert client.list_studies(display_name=display_name + "-a") == [a]
    assert client.list_studies(display_name=display_name) == []


@pytest.mark.server_v3
def test_stopped_trial_keeps_its_last_measurement_and_is_never_best(client, display_name):
    study = client.create_study(display_name, SPEC)
    stopped, finished = study.ask(2)
    stopped.report(1, 0.9)
    stopped.report(2, 0.01)  # better than anything, but stopped
    stopped.stop()
    assert stopped.state == "STOPPING"
    assert stopped.should_stop() is True
    done = study.tell(stopped)
    assert done.state == "STOPPED"
    assert done.final_metrics == {"loss": 0.01}
    assert [m.step for m in done.measurements] == [1, 2]
    study.tell(finished, 0.5)
    assert [t.name for t in study.best_trials] == [finished.name]
    assert {t.name: t.state for t in study.trials} == {
        stopped.name: "STOPPED",
        finished.name: "SUCCEEDED",
    }


@pytest.mark.server_v3
def test_study_and_trial_metadata_round_trip(client, display_name):
    study = client.create_study(display_name, SPEC, metadata={"team": "ads"})
    assert study.metadata == {"team": "ads"}
    assert study.set_metadata(code="v1.2", logs="http://logs/1") == {
        "team": "ads", "code": "v1.2", "logs": "http://logs/1",
    }
    assert study.delete_metadata("logs", "absent") == {"team": "ads", "code": "v1.2"}
    assert study.metadata == {"team": "ads", "code": "v1.2"}

    [trial] = study.ask()
    assert trial.set_metadata(host="gpu-3", run="7") == {"host": "gpu-3", "run": "7"}
    assert trial.update_metadata(set={"run": "8"}, remove=["host"]) == {"run": "8"}
    assert study.get_trial(trial.id).metadata == {"run": "8"}
    study.tell(trial, 1.0)
    assert study.get_trial(trial.id).metadata == {"run": "8"}
    with pytest.raises(TypeError, match=r'metadata\["run"\]'):
        trial.set_metadata(run=9)


@pytest.mark.server_v3
def test_delete_trial_removes_it(client, display_name):
    study = client.create_study(display_name, SPEC)
    kept, deleted = study.ask(2)
    study.delete_trial(deleted)
    with pytest.raises(evoscale.NotFoundError):
        study.get_trial(deleted.id)
    with pytest.raises(evoscale.NotFoundError):
        study.tell(deleted, 1.0)
    assert [t.name for t in study.trials] == [kept.name]


# ---- DataFrame -------------------------------------------------------------------------------


def test_trials_dataframe_has_a_row_per_trial_with_params_and_values(client, display_name):
    pandas = pytest.importorskip("pandas")
    study = client.create_study(display_name, SPEC)
    trials = study.ask(4)
    for i, trial in enumerate(trials[:3]):
        study.tell(trial, 0.1 * (i + 1))
    study.tell(trials[3], infeasible="out of memory")
    frame = study.trials_dataframe()
    assert isinstance(frame, pandas.DataFrame)
    assert len(frame) == 4
    assert list(frame["name"]) == [t.name for t in trials]
    expected = {"params_lr", "params_layers", "params_dim", "params_opt", "values_loss"}
    assert expected <= set(frame.columns)
    assert list(frame["state"]) == ["SUCCEEDED"] * 3 + ["INFEASIBLE"]
    assert list(frame["values_loss"][:3]) == [0.1, 0.2, 0.1 * 3]
    assert math.isnan(frame["values_loss"][3])
    assert list(frame["params_opt"]) == [t.params["opt"] for t in trials]
