// How the SQLite stores make a commit durable.
#ifndef EVOSCALE_SERVICE_STORE_DURABILITY_H_
#define EVOSCALE_SERVICE_STORE_DURABILITY_H_

namespace evoscale::service {

// How a commit reaches the disk.
enum class Durability {
  // synchronous=NORMAL in WAL mode: a commit is in the WAL (the OS's page cache) before it is
  // acknowledged, so it survives the process being killed (kill -9); a power loss may drop
  // the last commits but never corrupts the database.
  kProcessCrash,
  // synchronous=FULL: every commit is fsync'ed before it is acknowledged; survives power loss.
  kPowerLoss,
};

}  // namespace evoscale::service

#endif  // EVOSCALE_SERVICE_STORE_DURABILITY_H_
