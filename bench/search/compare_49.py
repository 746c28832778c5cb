"""GENETIC beside Optuna 4.9's samplers on the search suite, at several budgets (issue 44).

Reads evoscale's `suite_bench --json_out F --checkpoints ...` lines and `optuna_suite.py
--checkpoints ...` lines (both runs of the same budget and seeds; a run's regret after c trials
is the regret of a study of budget c, since no sampler here knows its budget) and prints, for
each budget, the median regret per problem and method, GENETIC's ratio to the best peer and to
GPSampler, and the bars:
  - final: GENETIC no worse than the best peer on >= 3/4 of the held-out problems, and no worse
    than GPSampler on every mixed or conditional one (hpo_*);
  - anytime: at a quarter and at half of the budget, no worse than the best peer on >= half.

--async PEERS_ASYNC.jsonl adds GENETIC with 8 trials in flight (OURS.jsonl's async_workers lines)
beside its sequential figure and Optuna's (optuna_suite.py --async_workers 8), over the seeds
both ran; --mo OURS_MO.jsonl PEERS_MO.jsonl adds the multi-objective hypervolumes.

usage: compare_49.py OURS.jsonl PEERS.jsonl [--budgets 50,100] [--anytime 100:25,50]
       [--async PEERS_ASYNC.jsonl] [--mo OURS_MO.jsonl PEERS_MO.jsonl]
"""
import argparse
import json
import statistics
import sys

PEERS = ["gp", "tpe", "tpe_mv", "cmaes", "random"]


def load(path, key, workers=0):
    """{(problem, method): {"split": S, "at": {trials: [regret per seed]}}} of the runs with
    `workers` trials in flight (0: sequential)."""
    table = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "suite" not in r or r.get("batch", 1) != 1 or r.get("async_workers", 0) != workers:
                continue
            at = {int(k): v for k, v in r.get("regrets_at", {}).items()}
            at[int(r["budget"])] = r["regrets"]
            table[(r["suite"], r[key])] = {"split": r["split"], "at": at}
    return table


def medians(ours, peers, trials):
    """Per problem: (split, GENETIC's median, {peer: median}) where all have `trials`."""
    rows = {}
    for (problem, _), entry in ours.items():
        if trials not in entry["at"]:
            continue
        peer_medians = {}
        for peer in PEERS:
            got = peers.get((problem, peer))
            if got is not None and trials in got["at"]:
                peer_medians[peer] = statistics.median(got["at"][trials])
        if peer_medians:
            rows[problem] = (entry["split"], statistics.median(entry["at"][trials]), peer_medians)
    return rows


def table(rows, trials):
    print("\n### %d trials: median regret\n" % trials)
    print("| problem | split | GENETIC | " + " | ".join(PEERS) + " | / best peer | / gp |")
    print("|---|---|---|" + "---|" * len(PEERS) + "---|---|")
    for problem, (split, ours, peer) in sorted(rows.items(), key=lambda kv: (kv[1][0], kv[0])):
        best = min(peer.values()) if peer else float("nan")
        cells = ["%.4g" % peer[p] if p in peer else "-" for p in PEERS]
        ratio = lambda a, b: "%.2f" % (a / b) if b > 0 else ("tie" if a == b else "inf")
        print("| %s | %s | %.4g | %s | %s | %s |" % (
            problem, split, ours, " | ".join(cells), ratio(ours, best),
            ratio(ours, peer["gp"]) if "gp" in peer else "-"))


def wins(rows, split):
    chosen = {p: r for p, r in rows.items() if r[0] == split and r[2]}
    won = [p for p, (_, ours, peer) in chosen.items() if ours <= min(peer.values())]
    return len(won), len(chosen)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ours")
    ap.add_argument("peers")
    ap.add_argument("--budgets", default="50,100")
    ap.add_argument("--anytime", default="100:25,50",
                    help="budget:quarter,half pairs separated by ';'")
    ap.add_argument("--async", dest="async_peers", default="")
    ap.add_argument("--workers", type=int, default=8, help="trials in flight of the --async runs")
    ap.add_argument("--mo", nargs=2, default=None)
    args = ap.parse_args()
    ours, peers = load(args.ours, "algorithm"), load(args.peers, "sampler")
    ours = {k: v for k, v in ours.items() if k[1] == "GENETIC"}
    verdicts = []
    for budget in [int(b) for b in args.budgets.split(",") if b]:
        rows = medians(ours, peers, budget)
        table(rows, budget)
        won, total = wins(rows, "held-out")
        mixed = [(p, r) for p, r in rows.items() if p.startswith(("hpo_", "noisy_hpo_")) and "gp" in r[2]]
        mixed_ok = [p for p, (_, o, peer) in mixed if o <= peer["gp"]]
        tuning_won, tuning_total = wins(rows, "tuning")
        verdicts.append("%d trials: held-out no worse than the best peer on %d of %d (bar: >= 3/4 -> %s); "
                        "tuning %d of %d; mixed/conditional (both parts) no worse than GPSampler on %d of %d (%s)" % (
                            budget, won, total, "HOLDS" if total and won * 4 >= 3 * total else "NOT MET",
                            tuning_won, tuning_total, len(mixed_ok), len(mixed),
                            "HOLDS" if mixed and len(mixed_ok) == len(mixed) else "NOT MET"))
    for spec in filter(None, args.anytime.split(";")):
        budget, points = spec.split(":")
        for trials in [int(t) for t in points.split(",")]:
            rows = medians(ours, peers, trials)
            held = {p: r for p, r in rows.items() if r[2]}
            won = sum(1 for _, o, peer in held.values() if o <= min(peer.values()))
            verdicts.append("anytime, budget %s at %d trials: no worse than the best peer on %d of %d "
                            "(bar: >= 1/2 -> %s)" % (budget, trials, won, len(held),
                                                     "HOLDS" if held and 2 * won >= len(held) else "NOT MET"))
    if args.async_peers:
        async_table(args, ours)
    if args.mo:
        mo_table(*args.mo)
    print()
    for v in verdicts:
        print("- " + v)


def async_table(args, ours):
    w = args.workers
    ours_async = {k: v for k, v in load(args.ours, "algorithm", w).items() if k[1] == "GENETIC"}
    peers_async = load(args.async_peers, "sampler", w)
    budget = max(int(b) for b in args.budgets.split(",") if b)
    print("\n### %d trials in flight, %d trials: median regret over the seeds every method ran\n" % (w, budget))
    print("| problem | GENETIC sequential | GENETIC, %d in flight | ratio | gp, %d in flight | "
          "tpe constant liar, %d in flight |" % (w, w, w))
    print("|---|---|---|---|---|---|")
    within = total = 0
    for (problem, _), entry in sorted(ours_async.items()):
        peer = {s: peers_async[(problem, s)]["at"][budget] for s in ("gp", "tpe_cl")
                if (problem, s) in peers_async}
        seeds = min([len(v) for v in peer.values()] + [len(entry["at"][budget])])
        seq = statistics.median(ours[(problem, "GENETIC")]["at"][budget][:seeds])
        par = statistics.median(entry["at"][budget][:seeds])
        total += 1
        within += par <= 1.5 * seq
        cells = ["%.4g" % statistics.median(peer[s][:seeds]) if s in peer else "-" for s in ("gp", "tpe_cl")]
        print("| %s | %.4g | %.4g | %.2f | %s |" % (problem, seq, par, par / seq if seq > 0 else float("nan"),
                                                 " | ".join(cells)))
    print("\nWithin 1.5x of sequential on %d of %d" % (within, total))


def mo_table(ours_path, peers_path):
    rows = {}
    for path, key in ((ours_path, "algorithm"), (peers_path, "sampler")):
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    r = json.loads(line)
                    if "mo" in r:
                        rows.setdefault(r["mo"], {})[("ours" if key == "algorithm" else r["sampler"])] = r["median_hv"]
    print("\n### Multi-objective: median hypervolume (higher is better)\n")
    print("| problem | NSGA2 (evoscale) | Optuna NSGA-II | Optuna TPE | >= both |")
    print("|---|---|---|---|---|")
    for problem, r in rows.items():
        ok = all(r.get("ours", 0) >= r[s] for s in ("nsga2", "tpe") if s in r)
        print("| %s | %.4f | %s | %s | %s |" % (problem, r.get("ours", float("nan")),
                                             "%.4f" % r["nsga2"] if "nsga2" in r else "-",
                                             "%.4f" % r["tpe"] if "tpe" in r else "-", "yes" if ok else "no"))


if __name__ == "__main__":
    sys.exit(main())
