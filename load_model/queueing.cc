#include "load_model/queueing.h"

#include <cmath>
#include <limits>

namespace evoscale::load_model {

double ErlangC(int servers, double erlangs) {
  if (servers <= 0 || erlangs >= servers) return 1.0;
  if (erlangs <= 0) return 0.0;
  // Erlang B by the stable recurrence B(k) = a B(k-1) / (k + a B(k-1)), then C from B.
  double b = 1.0;
  for (int k = 1; k <= servers; ++k) b = erlangs * b / (k + erlangs * b);
  const double rho = erlangs / servers;
  return b / (1.0 - rho + rho * b);
}

double MeanQueueWait(int servers, double erlangs, double service_time) {
  if (servers <= 0 || erlangs >= servers) return std::numeric_limits<double>::infinity();
  return ErlangC(servers, erlangs) * service_time / (servers - erlangs);
}

int MinServersForWait(double arrival_rate, double service_time, double max_wait,
                      int max_servers) {
  const double erlangs = arrival_rate * service_time;
  if (!(erlangs > 0)) return 1;
  int c = std::max(1, static_cast<int>(std::floor(erlangs)) + 1);
  while (c < max_servers && MeanQueueWait(c, erlangs, service_time) > max_wait) ++c;
  return std::min(c, max_servers);
}

}  // namespace evoscale::load_model
