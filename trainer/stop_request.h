// Asks a running trainer to stop: evoscale-trainer's SIGTERM handler calls RequestStop (it is
// async-signal-safe). The CPU trainer then ends its current step, writes a checkpoint when it
// has a checkpoint_dir, and returns ABORTED without evaluating, so that a run with `resume`
// continues from that step (a preempted trial loses no work). The GPU trainer does not look at
// it yet: a stopped GPU run resumes from its last periodic checkpoint.
#ifndef EVOSCALE_TRAINER_STOP_REQUEST_H_
#define EVOSCALE_TRAINER_STOP_REQUEST_H_

namespace evoscale::trainer {

void RequestStop();
bool StopRequested();

}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_STOP_REQUEST_H_
