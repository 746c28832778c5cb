// The sharded CTR trainer (embedding hash tables + dense MLP).
// The implementation arrives with the trainer issue; this header marks the module.
#ifndef EVOSCALE_TRAINER_TRAINER_H_
#define EVOSCALE_TRAINER_TRAINER_H_

namespace evoscale::trainer {}  // namespace evoscale::trainer

#endif  // EVOSCALE_TRAINER_TRAINER_H_
