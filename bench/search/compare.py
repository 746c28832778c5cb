"""Sets search_bench's JSON lines beside optuna_quality.py's, and suite_bench's beside
optuna_suite.py's, and checks the issue's bars.

usage: compare.py EVOSCALE.jsonl OPTUNA.jsonl [SUITE_EVOSCALE.jsonl SUITE_OPTUNA.jsonl]
"""
import json
import sys


def records(path):
    """The JSON lines of a bench's output, parsed."""
    with open(path) as f:
        return [json.loads(line) for line in f]


first = records(sys.argv[1])
zdt = [d for d in first if "zdt" in d]
ours = {(d["fn"], d["algorithm"], d["batch"]): d["median_regret"] for d in first if "zdt" not in d}
peer = {(d["fn"], d["sampler"]): d["median_regret"] for d in records(sys.argv[2])}

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
print("Bar 1b (GENETIC <= best of TPE, CMA-ES, random on >= 7 of 8): %d of %d -> %s"
      % (vs_best, len(fns), "HOLDS" if vs_best >= 7 else "FAILS"))

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
        within += r <= 1.3
        print("| %s | %.4g | %.4g | %.2f |" % (fn, s, p, r))
    print("\nBatches (within 1.3x of sequential): %d of %d" % (within, len(fns)))

if zdt:
    wins = sum(d["nsga2_hv"] > d["random_hv"] for d in zdt)
    print("\nBar 5 (NSGA2 hypervolume > RANDOM's on every ZDT seed): %d of %d -> %s"
          % (wins, len(zdt), "HOLDS" if wins == len(zdt) else "FAILS"))

if len(sys.argv) > 4:
    suite_ours, suite_peer = records(sys.argv[3]), records(sys.argv[4])
    mo_ours = {d["mo"]: d for d in suite_ours if "mo" in d}
    mo_peer = {d["mo"]: d for d in suite_peer if "mo" in d}
    ours = {(d["suite"], d["batch"]): d["median_regret"] for d in suite_ours if "mo" not in d}
    split = {d["suite"]: d["split"] for d in suite_ours if "mo" not in d}
    peer = {(d["suite"], d["sampler"]): d["median_regret"] for d in suite_peer if "mo" not in d}
    problems = []
    for (p, _) in ours:
        if p not in problems:
            problems.append(p)
    for part in ("tuning", "held-out"):
        names = [p for p in problems if split[p] == part]
        if not names:
            continue
        print("\n## Suite, %s part: median regret, GENETIC beside Optuna (this run)\n" % part)
        print("| problem | GENETIC | GENETIC, 8 at a time | " + " | ".join("optuna " + s for s in samplers)
              + " | GENETIC / best of TPE, CMA-ES, random | 8 at a time / sequential |")
        print("|---" * (3 + len(samplers) + 2) + "|")
        wins = 0
        for p in names:
            g, b = ours.get((p, 1)), ours.get((p, 8))
            best = [peer[(p, s)] for s in ("tpe", "cmaes", "random") if (p, s) in peer]
            r = ratio(g, min(best)) if g is not None and best else None
            wins += r is not None and r <= 1
            cells = ["%.4g" % g if g is not None else "-", "%.4g" % b if b is not None else "-"]
            cells += ["%.4g" % peer[(p, s)] if (p, s) in peer else "-" for s in samplers]
            cells.append("-" if r is None else "%.2f%s" % (r, "" if r <= 1 else " (worse)"))
            cells.append("-" if g is None or b is None else "%.2f" % ratio(b, g))
            print("| %s | %s |" % (p, " | ".join(cells)))
        need = 6 if part == "held-out" else 0
        print("\nGENETIC <= best of TPE, CMA-ES, random on %d of %d%s" % (
            wins, len(names), " -> Bar 1c (>= 6 of 8) %s" % ("HOLDS" if wins >= need else "FAILS")
            if part == "held-out" else " (tuned on these)"))
    if mo_ours:
        print("\n## Hypervolume, NSGA2 beside Optuna's NSGA-II (this run), median of seeds\n")
        print("| problem | evaluations | NSGA2 | optuna NSGA-II | ratio |")
        print("|---|---|---|---|---|")
        wins = 0
        for p, d in mo_ours.items():
            q = mo_peer.get(p)
            if q is None:
                continue
            wins += d["median_hv"] >= q["median_hv"]
            print("| %s | %d | %.4f | %.4f | %.3f |" % (p, d["budget"], d["median_hv"], q["median_hv"],
                                                      ratio(d["median_hv"], q["median_hv"])))
        print("\nBar 3 (NSGA2 hypervolume >= Optuna NSGA-II's on all %d): %d of %d -> %s"
              % (len(mo_ours), wins, len(mo_ours), "HOLDS" if wins == len(mo_ours) else "FAILS"))
