"""Sets search_bench's JSON lines beside optuna_quality.py's and checks the issue's bars.

usage: compare.py EVOSCALE.jsonl OPTUNA.jsonl
"""
import json
import sys

ours, peer = {}, {}
zdt = []
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "zdt" in d:
        zdt.append(d)
    else:
        ours[(d["fn"], d["algorithm"], d["batch"])] = d["median_regret"]
for line in open(sys.argv[2]):
    d = json.loads(line)
    peer[(d["fn"], d["sampler"])] = d["median_regret"]

fns = []
for (fn, _, _) in ours:
    if fn not in fns:
        fns.append(fn)
algos = []
for (_, a, b) in ours:
    if b == 1 and a not in algos:
        algos.append(a)
samplers = ["random", "tpe", "nsga2", "cmaes"]


def ratio(a, b):
    if b == 0:
        return float("inf") if a > 0 else 1.0
    return a / b


print("\n## Median regret, evoscale (this run) beside Optuna 3.1 (this run)\n")
print("| fn | " + " | ".join(algos) + " | " + " | ".join("optuna " + s for s in samplers)
      + " | GENETIC / optuna NSGA-II | GENETIC / best of TPE, CMA-ES, random |")
print("|---" * (1 + len(algos) + len(samplers) + 2) + "|")
vs_nsga = vs_best = 0
for fn in fns:
    g = ours.get((fn, "GENETIC", 1))
    cells = ["%.4g" % ours[(fn, a, 1)] if (fn, a, 1) in ours else "-" for a in algos]
    cells += ["%.4g" % peer[(fn, s)] if (fn, s) in peer else "-" for s in samplers]
    r_nsga = r_best = None
    if g is not None and (fn, "nsga2") in peer:
        r_nsga = ratio(g, peer[(fn, "nsga2")])
        vs_nsga += r_nsga <= 1
    best = [peer[(fn, s)] for s in ("tpe", "cmaes", "random") if (fn, s) in peer]
    if g is not None and best:
        r_best = ratio(g, min(best))
        vs_best += r_best <= 1
    cells.append("-" if r_nsga is None else "%.2f%s" % (r_nsga, "" if r_nsga <= 1 else " (worse)"))
    cells.append("-" if r_best is None else "%.2f%s" % (r_best, "" if r_best <= 1 else " (worse)"))
    print("| %s | %s |" % (fn, " | ".join(cells)))
print("\nBar 1a (GENETIC <= Optuna NSGA-II on all %d): %d of %d -> %s"
      % (len(fns), vs_nsga, len(fns), "HOLDS" if vs_nsga == len(fns) else "FAILS"))
print("Bar 1b (GENETIC <= best of TPE, CMA-ES, random on >= 5 of 8): %d of %d -> %s"
      % (vs_best, len(fns), "HOLDS" if vs_best >= 5 else "FAILS"))

batches = sorted({b for (_, a, b) in ours if a == "GENETIC" and b > 1})
for b in batches:
    print("\n## GENETIC with %d suggestions per request (parallel workers) vs sequential\n" % b)
    print("| fn | sequential | %d at a time | ratio |" % b)
    print("|---|---|---|---|")
    within = 0
    for fn in fns:
        s, p = ours.get((fn, "GENETIC", 1)), ours.get((fn, "GENETIC", b))
        if s is None or p is None:
            continue
        r = ratio(p, s)
        within += r <= 1.5
        print("| %s | %.4g | %.4g | %.2f |" % (fn, s, p, r))
    print("\nBar 2 (within 1.5x of sequential on >= 6 of 8): %d of %d -> %s"
          % (within, len(fns), "HOLDS" if within >= 6 else "FAILS"))

if zdt:
    wins = sum(d["nsga2_hv"] > d["random_hv"] for d in zdt)
    print("\nBar 5 (NSGA2 hypervolume > RANDOM's on every ZDT seed): %d of %d -> %s"
          % (wins, len(zdt), "HOLDS" if wins == len(zdt) else "FAILS"))
