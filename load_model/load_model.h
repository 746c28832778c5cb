// Load models: telemetry in, resource requests and autoscaling recommendations out.
// The implementation arrives with the load-model issue; this header marks the module.
#ifndef EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_
#define EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_

namespace evoscale::load_model {}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_
