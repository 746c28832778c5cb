// Queueing formulas for the latency check of replica recommendations (M/M/c, Erlang C).
#ifndef EVOSCALE_LOAD_MODEL_QUEUEING_H_
#define EVOSCALE_LOAD_MODEL_QUEUEING_H_

namespace evoscale::load_model {

// Probability that an arriving request waits in an M/M/c queue with `servers` servers and
// offered load `erlangs` (arrival rate x mean service time). 1 when erlangs >= servers.
double ErlangC(int servers, double erlangs);

// Mean time a request waits before service, in the unit of `service_time`; +inf when the
// queue is unstable (erlangs >= servers).
double MeanQueueWait(int servers, double erlangs, double service_time);

// The fewest servers (>= 1) whose mean queue wait is at most `max_wait` for `arrival_rate`
// requests per unit time each taking `service_time`. Returns 1 for no load; caps at
// `max_servers`.
int MinServersForWait(double arrival_rate, double service_time, double max_wait,
                      int max_servers);

}  // namespace evoscale::load_model

#endif  // EVOSCALE_LOAD_MODEL_QUEUEING_H_
