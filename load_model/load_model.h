// Load models: telemetry in, resource requests and autoscaling recommendations out.
// Umbrella header; include the specific headers where only one part is needed.
//
//   decaying_histogram.h    exponential-bucket histograms with half-life decay
//   recommender.h           ResourceRecommender / ReplicaRecommender interfaces
//   vpa.h, hpa.h            Kubernetes' VPA recommender and HPA controller algorithms
//   evoscale_policy.h       evoscale's own policies (the default)
//   regression.h            online least squares; forecast.h seasonal forecasts
//   queueing.h              M/M/c latency check
//   usl.h                   Universal Scalability Law fit and parallelism choice
//   trial_resource_model.h  per-trial resource requests from earlier trials' telemetry
//   traces.h, replay.h      public trace readers and the `evoscale replay` engine
#ifndef EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_
#define EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_

#include "load_model/decaying_histogram.h"
#include "load_model/evoscale_policy.h"
#include "load_model/forecast.h"
#include "load_model/hpa.h"
#include "load_model/queueing.h"
#include "load_model/recommender.h"
#include "load_model/regression.h"
#include "load_model/replay.h"
#include "load_model/traces.h"
#include "load_model/trial_resource_model.h"
#include "load_model/usl.h"
#include "load_model/vpa.h"

#endif  // EVOSCALE_LOAD_MODEL_LOAD_MODEL_H_
