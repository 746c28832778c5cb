#!/usr/bin/python3
"""One trial of bench/closed_loop/cost_aware_bench.py: runs evoscale-trainer and passes its JSON
lines on, with the step put in a unit common to every batch size.

The trainer's `step` is a batch, so a run of E epochs has E x rows / batch_size steps: 4x more at
batch 256 than at 1024. A study has one max_step, and Optuna's pruners compare trials at equal
steps, so here a step is UNIT (1024) training examples, whatever the batch size: progress lines
come every 8192 examples (--progress-every 8192 / batch_size, added here) at steps 8, 16, ...,
and the final line's `steps` is its examples / UNIT (an error line's step: its batches x
batch_size / UNIT). Everything else passes through unchanged. SIGTERM and SIGINT go on to the
trainer, which then stops as it does when signalled itself.

usage: fidelity_trial.py TRAINER [trainer flags, with --batch-size N among them]
"""
import json
import signal
import subprocess
import sys

UNIT = 1024             # training examples per step of the study
PROGRESS_EXAMPLES = 8192  # examples between progress lines (a multiple of every batch size)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    trainer, flags = sys.argv[1], sys.argv[2:]
    batch = 1024  # the trainer's default
    for i, flag in enumerate(flags[:-1]):
        if flag in ("--batch-size", "--batch_size"):
            batch = int(flags[i + 1])
    if PROGRESS_EXAMPLES % batch:
        sys.exit("fidelity_trial.py: --batch-size %d does not divide %d" % (batch,
                                                                           PROGRESS_EXAMPLES))
    child = subprocess.Popen([trainer] + flags + ["--progress-every",
                                                  str(PROGRESS_EXAMPLES // batch)],
                             stdout=subprocess.PIPE, text=True)

    def forward(sig, _frame):
        if child.poll() is None:
            child.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for line in child.stdout:
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            if isinstance(event.get("examples"), int):
                if event.get("event") == "progress":
                    event["step"] = event["examples"] // UNIT
                elif event.get("event") == "final":
                    event["steps"] = event["examples"] // UNIT
            elif event.get("event") == "error" and isinstance(event.get("step"), int):
                event["step"] = event["step"] * batch // UNIT  # an error line has no examples
            line = json.dumps(event, separators=(",", ":")) + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()
    code = child.wait()
    sys.exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
