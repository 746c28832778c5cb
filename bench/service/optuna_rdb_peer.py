"""The peer of service_bench --postgres: Optuna's RDBStorage on the same PostgreSQL server,
N worker processes sharing one study, each looping ask + tell (random sampler, a trivial
objective, as ../shared/bench/hpo/optuna_sqlite_parallel.py does on SQLite) for a fixed time.
Prints one JSON line: completed trials per second (pairs/s in service_bench's terms), errors.

  /usr/bin/python3 bench/service/optuna_rdb_peer.py URL WORKERS SECONDS

URL: an SQLAlchemy URL, e.g. postgresql+psycopg2://postgres@127.0.0.1:PORT/optuna (Debian's
python3-optuna and python3-psycopg2).
"""
import json
import multiprocessing as mp
import sys
import time

import optuna

optuna.logging.set_verbosity(optuna.logging.ERROR)


def work(url, seconds, start, q):
    study = optuna.load_study(study_name="peer", storage=url,
                              sampler=optuna.samplers.RandomSampler())
    done = errors = 0
    latencies = []
    start.wait()  # a barrier: every worker has loaded the study
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        t0 = time.perf_counter()
        try:
            trial = study.ask()
            x = trial.suggest_float("x", -5, 5)
            study.tell(trial, x * x)
            done += 1
            latencies.append(time.perf_counter() - t0)
        except Exception:  # counted: a peer's failure is a figure, not a crash
            errors += 1
    q.put((done, errors, latencies))


def main():
    url, workers, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    optuna.create_study(study_name="peer", storage=url, load_if_exists=True)
    q = mp.Queue()
    start = mp.Barrier(workers + 1)
    procs = [mp.Process(target=work, args=(url, seconds, start, q)) for _ in range(workers)]
    for p in procs:
        p.start()
    start.wait()
    t = time.perf_counter()
    results = [q.get() for _ in procs]
    dt = time.perf_counter() - t
    for p in procs:
        p.join()
    done = sum(r[0] for r in results)
    lat = sorted(x for r in results for x in r[2])
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3 if lat else None
    print(json.dumps({"peer": f"optuna-{optuna.__version__} RDBStorage postgresql",
                      "workers": workers, "trials_done": done,
                      "errors": sum(r[1] for r in results), "seconds": round(dt, 2),
                      "trials_per_s": round(done / dt, 1),
                      "pair_p99_ms": round(p99, 1) if p99 else None}))


if __name__ == "__main__":
    main()
