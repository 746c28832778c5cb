"""Many clients on one study: worker processes sharing ask/tell, concurrent get-or-create."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import evoscale

HERE = Path(__file__).resolve().parent
WORKERS = 8
MAX_TRIALS = 48

SPEC = {
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
    "parameters": [
        {"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1}, "scale": "LOG"},
        {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
        {"name": "dim", "discrete_spec": {"values": [8, 16, 32]}},
        {"name": "opt", "categorical_spec": {"values": ["adam", "sgd"]}},
    ],
    "algorithm": {"algorithm": "GENETIC", "seed": 11},
    "max_trials": MAX_TRIALS,
}


@pytest.mark.server_v3
def test_worker_processes_share_one_study_and_no_trial_is_handed_out_twice(
    evoscaled, display_name, tmp_path
):
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(SPEC))
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "ask_tell_worker.py"),
                evoscaled.address,
                display_name,
                str(spec_path),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(WORKERS)
    ]
    told: list[dict] = []
    for worker in workers:
        out, err = worker.communicate(timeout=120)
        assert worker.returncode == 0, err
        told.extend(json.loads(line) for line in out.splitlines())

    names = [t["name"] for t in told]
    assert len(names) == len(set(names)), "a trial was handed to two workers"
    assert len(names) == MAX_TRIALS
    assert len({t["study"] for t in told}) == 1
    with evoscale.Client(evoscaled.address) as client:
        [study] = client.list_studies(display_name=display_name)
        trials = study.trials
        assert study.state == "COMPLETED"
    assert len(trials) == MAX_TRIALS
    assert {t.state for t in trials} == {"SUCCEEDED"}
    stored = {t.name: t.final_metrics["loss"] for t in trials}
    assert stored == {t["name"]: t["loss"] for t in told}  # every value, to the last bit
    # Each trial was handed to the worker that told it, under that worker's own client id.
    # (How many workers got trials depends on timing: a fast first worker may take them all.)
    assert {t.name: t.client_id for t in trials} == {t["name"]: t["client_id"] for t in told}
    assert all(t["client_id"].startswith("py-") for t in told)


@pytest.mark.server_v3
def test_concurrent_creators_end_with_one_study(evoscaled, display_name):
    creators = 10
    barrier = threading.Barrier(creators)
    names: list[str] = []
    errors: list[BaseException] = []

    def create() -> None:
        try:
            with evoscale.Client(evoscaled.address) as client:
                barrier.wait()
                names.append(client.create_study(display_name, SPEC).name)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(creators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(names) == creators and len(set(names)) == 1
    with evoscale.Client(evoscaled.address) as client:
        assert [s.name for s in client.list_studies(display_name=display_name)] == names[:1]
