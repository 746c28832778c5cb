"""One worker process of test_sharing.py: joins a study by display name, then asks and tells
until the budget is spent. Prints one JSON line per trial it completed: {"name", "loss",
"study", "client_id"}.

usage: python ask_tell_worker.py ADDRESS DISPLAY_NAME SPEC_JSON_FILE
"""

import json
import math
import sys

import evoscale


def loss(params: dict) -> float:
    """A deterministic stand-in for a training run (full-precision floats, to check that the
    server stores every digit)."""
    return (
        (math.log10(params["lr"]) + 2.5) ** 2
        + 0.1 * abs(params["layers"] - 2)
        + 0.01 * math.log2(params["dim"])
        + (0.0 if params["opt"] == "adam" else 0.3)
        + math.sin(params["lr"] * 1000) / 7
    )


def main() -> None:
    address, display_name, spec_path = sys.argv[1:4]
    with evoscale.Client(address) as client:
        study = client.create_study(display_name, spec_path, load_if_exists=True)
        while trials := study.ask(1):
            for trial in trials:
                value = loss(trial.params)
                study.tell(trial, value)
                told = {
                    "name": trial.name,
                    "loss": value,
                    "study": study.name,
                    "client_id": client.client_id,
                }
                print(json.dumps(told), flush=True)


if __name__ == "__main__":
    main()
