// `evoscale-serve rollback`: a served model back to an earlier checkpoint, in one command.
//
//   evoscale-serve rollback --model-dir DIR --to STEP [--replicas HOST:PORT,...]
//
// 1. Checks that DIR holds a complete checkpoint of STEP (every rank's, for a job's); if not,
//    says which steps it holds and changes nothing.
// 2. Moves every newer checkpoint out of DIR, into DIR.rolled-back/<UTC time>/ (rank folders
//    kept). DIR's newest is then STEP: a trainer restarted with --resume continues from it, and a
//    replica started later serves it. Stop the trainer first: one still running would go on
//    from where it was.
// 3. Asks each replica to serve DIR's newest again (ModelSyncService.Reload).
// One JSON line per action, then {"event":"rolled_back",...}. Exit 0 when every step worked,
// 1 otherwise (each replica is still asked), 2 for bad flags.
#ifndef EVOSCALE_SERVE_ROLLBACK_H_
#define EVOSCALE_SERVE_ROLLBACK_H_

#include <ostream>

namespace evoscale::serve {

// argv[0] is "rollback".
int RollbackMain(int argc, char** argv, std::ostream& out, std::ostream& err);

}  // namespace evoscale::serve

#endif  // EVOSCALE_SERVE_ROLLBACK_H_
