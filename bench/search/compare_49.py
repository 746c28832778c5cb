"""GENETIC beside Optuna 4.9's samplers on the search suite, at several budgets (issue 44).

Reads evoscale's `suite_bench --json_out F --checkpoints ...` lines and `optuna_suite.py
--checkpoints ...` lines (both runs of the same budget and seeds; a run's regret after c trials
is the regret of a study of budget c, since no sampler here knows its budget) and prints, for
each budget, the median regret per problem and method, GENETIC's ratio to the best peer and to
GPSampler, and the bars:
  - final: GENETIC no worse than the best peer on >= 3/4 of the held-out problems, and no worse
    than GPSampler on every mixed or conditional one (hpo_*);
  - anytime: at a quarter and at half of the budget, no worse than the best peer on >= half.

usage: compare_49.py OURS.jsonl PEERS.jsonl [--budgets 50,100] [--anytime 100:25,50]
"""
import argparse
import json
import statistics
import sys

PEERS = ["gp", "tpe", "tpe_mv", "cmaes", "random"]


def load(path, key):
    """{(problem, method): {"split": S, "at": {trials: [regret per seed]}}}"""
    table = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "suite" not in r or r.get("batch", 1) != 1:
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
                        "tuning %d of %d; mixed/conditional no worse than GPSampler on %d of %d (%s)" % (
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
    print()
    for v in verdicts:
        print("- " + v)


if __name__ == "__main__":
    sys.exit(main())
