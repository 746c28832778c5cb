#!/usr/bin/env python3
"""Replays every placement policy on the openb traces and compares with FGD's published figures.

Runs `evoscale place --json` for each trace x policy x seed (default: the five traces of issue
31, all seven policies, seeds 42-51), takes the median over seeds of unallocated GPU % at 100%
and 130% of arrival, and writes next to this script:
  results.md     the table, ours beside the published figures (issue 31), with the differences
  results.json   every run's summary (unallocated at 100/130, failed pods, wall seconds)
  default.csv    the default trace's median unallocated % per 1% of arrival, per policy
  default.svg    the same as a plot

With --departures it runs instead `evoscale place --departures --json` on the default trace,
evoscale with priorities and preemption against FIFO best fit without preemption (--policy
bestfit --no-preemption --fifo), on the whole node list and on its first N nodes for each N of
--departure-nodes (the trace's own clock never loads the whole cluster), and writes
departures.md and departures.json.

With --uniformity it replays the default trace (seeds as --seeds) under the policies of
UNIFORMITY_CONFIGS, evoscale with each of its tie rules among them, and writes uniformity.md and
uniformity.json: the median unallocated GPU % at 100% and 130% beside the uniformity figures
(the standard deviation over the GPU nodes of their GPU share in use, and over all nodes of
their CPU share, in percentage points) at 50%, 80% and 100% of arrival.

usage: run_placement_bench.py [--evoscale build/bin/evoscale] [--traces DIR] [--seeds 42-51]
                              [--policies evoscale,fgd,...] [--trace-names default,cpu050,...]
                              [--jobs 2] [--out DIR] [--departures [--departure-nodes 24,16,12]]
                              [--uniformity]
"""
import argparse
import concurrent.futures
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
POLICIES = ["random", "dotprod", "clustering", "packing", "bestfit", "fgd", "evoscale"]
TRACES = ["default", "cpu050", "gpushare40", "gpuspec10", "multigpu20"]
# The simulator's published medians (hkust-adsl/kubernetes-scheduler-simulator, 10 seeds, tune
# 1.3), unallocated GPU % at 100% / 130% arrival, as issue 31 quotes them.
PUBLISHED = {
    "default": {"random": (13.75, 12.62), "dotprod": (9.44, 9.20), "clustering": (8.42, 8.21),
                "packing": (8.19, 7.94), "bestfit": (7.09, 6.89), "fgd": (4.77, 4.60)},
    "cpu050": {"random": (11.02, 8.84), "dotprod": (6.94, 6.71), "clustering": (6.52, 6.21),
               "packing": (6.47, 6.21), "bestfit": (6.42, 6.18), "fgd": (5.00, 4.80)},
    "gpushare40": {"random": (15.04, 13.97), "dotprod": (10.66, 10.42),
                   "clustering": (10.18, 9.94), "packing": (10.19, 9.93),
                   "bestfit": (8.53, 8.27), "fgd": (6.05, 5.86)},
    "gpuspec10": {"random": (13.69, 12.49), "dotprod": (9.75, 9.56), "clustering": (8.06, 7.81),
                  "packing": (7.77, 7.56), "bestfit": (6.88, 6.67), "fgd": (5.30, 5.06)},
    "multigpu20": {"random": (13.16, 11.34), "dotprod": (8.19, 7.98),
                   "clustering": (6.62, 6.41), "packing": (6.49, 6.25),
                   "bestfit": (6.27, 6.10), "fgd": (4.47, 4.35)},
}


def seeds_of(text):
    low, _, high = text.partition("-")
    return list(range(int(low), int(high or low) + 1))


def run_one(binary, traces, trace, policy, seed, extra=()):
    command = [binary, "place", "--pods", os.path.join(traces, f"openb_pod_list_{trace}.csv"),
               "--nodes", os.path.join(traces, "openb_node_list_gpu_node.csv"),
               "--policy", policy, "--seed", str(seed), "--tune", "1.3", "--json", *extra]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {done.returncode}: {done.stderr}")
    report = json.loads(done.stdout)
    curve = {p["arrived_percent"]: p["unallocated_percent"] for p in report["points"]}
    return {"trace": trace, "policy": policy, "seed": seed,
            "at_100": report["unallocated_percent_at_100"],
            "at_130": report["unallocated_percent_at_130"],
            "failed_pods": report["failed_pods"], "submitted_pods": report["submitted_pods"],
            "replay_seconds": report["wall_seconds"], "process_seconds": wall,
            "curve": curve,
            "gpu_sd": {p["arrived_percent"]: p["gpu_utilization_stddev"] for p in report["points"]},
            "cpu_sd": {p["arrived_percent"]: p["cpu_utilization_stddev"] for p in report["points"]}}


def table(runs, traces, policies):
    lines = ["| trace | policy | ours 100% | ours 130% | published 100% | published 130% "
             "| diff 100% | diff 130% |", "|---|---|---|---|---|---|---|---|"]
    medians = {}
    for trace in traces:
        for policy in policies:
            mine = [r for r in runs if r["trace"] == trace and r["policy"] == policy]
            if not mine:
                continue
            at_100 = statistics.median(r["at_100"] for r in mine)
            at_130 = statistics.median(r["at_130"] for r in mine)
            medians[(trace, policy)] = (at_100, at_130)
            published = PUBLISHED.get(trace, {}).get(policy)
            if published is None:  # evoscale: against the published FGD
                published = PUBLISHED.get(trace, {}).get("fgd")
                label = "(FGD) "
            else:
                label = ""
            if published:
                lines.append(f"| {trace} | {policy} | {at_100:.2f} | {at_130:.2f} | "
                             f"{label}{published[0]:.2f} | {label}{published[1]:.2f} | "
                             f"{at_100 - published[0]:+.2f} | {at_130 - published[1]:+.2f} |")
            else:
                lines.append(f"| {trace} | {policy} | {at_100:.2f} | {at_130:.2f} | | | | |")
    return "\n".join(lines), medians


def median_curves(runs, trace, policies):
    curves = {}
    for policy in policies:
        mine = [r["curve"] for r in runs if r["trace"] == trace and r["policy"] == policy]
        if not mine:
            continue
        arrivals = sorted(set.intersection(*(set(int(k) for k in c) for c in mine)))
        curves[policy] = [(a, statistics.median(c[a] for c in mine)) for a in arrivals]
    return curves


def write_svg(path, curves, title):
    width, height, left, bottom, top, right = 720, 420, 60, 40, 30, 130
    x0, x1, y0, y1 = 50, 130, 0, 30  # where the policies differ; higher values are clipped
    def sx(x): return left + (x - x0) / (x1 - x0) * (width - left - right)
    def sy(y): return height - bottom - (y - y0) / (y1 - y0) * (height - top - bottom)
    colours = ["#999999", "#8c564b", "#9467bd", "#ff7f0e", "#2ca02c", "#1f77b4", "#d62728"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           f'<text x="{width / 2}" y="18" text-anchor="middle">{title}</text>',
           f'<line x1="{left}" y1="{sy(y0)}" x2="{sx(x1)}" y2="{sy(y0)}" stroke="black"/>',
           f'<line x1="{left}" y1="{sy(y0)}" x2="{left}" y2="{sy(y1)}" stroke="black"/>']
    for x in range(x0, x1 + 1, 10):
        out.append(f'<text x="{sx(x)}" y="{sy(y0) + 16}" text-anchor="middle">{x}</text>')
    for y in range(y0, y1 + 1, 5):
        out.append(f'<text x="{left - 6}" y="{sy(y) + 4}" text-anchor="end">{y}</text>')
    out.append(f'<text x="{sx((x0 + x1) / 2)}" y="{height - 6}" text-anchor="middle">'
               'arrived GPU %</text>')
    out.append(f'<text x="14" y="{sy(y1 / 2)}" transform="rotate(-90 14 {sy(y1 / 2)})" '
               'text-anchor="middle">unallocated GPU %</text>')
    for i, (policy, points) in enumerate(curves.items()):
        colour = colours[i % len(colours)]
        path_points = " ".join(f"{sx(a):.1f},{sy(min(u, y1)):.1f}" for a, u in points if a >= x0)
        out.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" '
                   f'points="{path_points}"/>')
        out.append(f'<text x="{width - right + 10}" y="{top + 20 + 16 * i}" fill="{colour}">'
                   f'{policy}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


DEPARTURE_CONFIGS = [("evoscale, priorities, preemption", ["--policy", "evoscale"]),
                     ("bestfit, FIFO, no preemption",
                      ["--policy", "bestfit", "--no-preemption", "--fifo"])]


def run_departures(args):
    nodes_path = os.path.join(args.traces, "openb_node_list_gpu_node.csv")
    pods_path = os.path.join(args.traces, "openb_pod_list_default.csv")
    with open(nodes_path) as f:
        node_lines = f.readlines()
    os.makedirs(args.out, exist_ok=True)
    rows, runs = [], []
    for count in [len(node_lines) - 1] + [int(n) for n in args.departure_nodes.split(",") if n]:
        path = nodes_path
        if count < len(node_lines) - 1:
            path = os.path.join(args.out, f"departures_nodes_{count}.csv.tmp")
            with open(path, "w") as f:
                f.writelines(node_lines[:count + 1])
        for name, flags in DEPARTURE_CONFIGS:
            start = time.monotonic()
            out = subprocess.run([args.evoscale, "place", "--pods", pods_path, "--nodes", path,
                                  "--departures", "--json"] + flags,
                                 check=True, capture_output=True, text=True).stdout
            r = json.loads(out)
            r["process_seconds"] = time.monotonic() - start
            r["config"] = name
            runs.append(r)
            rows.append(f"| {r['nodes']} ({r['total_gpus']} GPUs) | {name} | "
                        f"{r['ls_delay_median_seconds']:.0f} | {r['ls_delay_p99_seconds']:.0f} | "
                        f"{r['ls_placed_pods']} / {r['ls_pods']} | {r['preemptions']} | "
                        f"{r['evicted_pods']} | {r['evicted_gpu_hours']:.1f} | "
                        f"{r['never_placed_pods']} | {r['process_seconds']:.2f} |")
        if path != nodes_path:
            os.remove(path)
    report = ("| nodes | configuration | LS delay median s | LS delay p99 s | LS placed | "
              "preemptions | evicted pods | evicted GPU-h | never placed | wall s |\n"
              "|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    with open(os.path.join(args.out, "departures.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "departures.json"), "w") as f:
        json.dump(runs, f, indent=1)
    print(report)
    return 0


# (label, policy, extra flags) for --uniformity.
UNIFORMITY_CONFIGS = [
    ("evoscale (default: cpupods)", "evoscale", []),
    ("evoscale --secondary spread", "evoscale", ["--secondary", "spread"]),
    ("evoscale --secondary pack", "evoscale", ["--secondary", "pack"]),
    ("evoscale --secondary none", "evoscale", ["--secondary", "none"]),
    ("fgd", "fgd", []),
    ("bestfit", "bestfit", []),
    ("dotprod", "dotprod", []),
    ("random", "random", []),
]


def run_uniformity(args):
    seeds = seeds_of(args.seeds)
    jobs = [(c, s) for c in UNIFORMITY_CONFIGS for s in seeds]
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(
            lambda j: dict(run_one(args.evoscale, args.traces, "default", j[0][1], j[1],
                                   j[0][2]), config=j[0][0]), jobs))

    def median_at(mine, key, percent):
        values = [r[key].get(percent) for r in mine if r[key].get(percent) is not None]
        return statistics.median(values) if values else float("nan")

    rows, summary = [], []
    for label, _, _ in UNIFORMITY_CONFIGS:
        mine = [r for r in runs if r["config"] == label]
        row = {"config": label,
               "unallocated_100": statistics.median(r["at_100"] for r in mine),
               "unallocated_130": statistics.median(r["at_130"] for r in mine)}
        for percent in (50, 80, 100):
            row[f"gpu_sd_{percent}"] = median_at(mine, "gpu_sd", percent)
            row[f"cpu_sd_{percent}"] = median_at(mine, "cpu_sd", percent)
        summary.append(row)
        rows.append(f"| {label} | {row['unallocated_100']:.2f} | {row['unallocated_130']:.2f} | "
                    f"{row['gpu_sd_50']:.1f} | {row['gpu_sd_80']:.1f} | {row['gpu_sd_100']:.1f} | "
                    f"{row['cpu_sd_50']:.1f} | {row['cpu_sd_100']:.1f} |")
    report = (f"openb default trace, seeds {seeds[0]}-{seeds[-1]} (median), tune 1.3.\n\n"
              "| policy | unallocated % at 100% | at 130% | GPU share SD at 50% | at 80% | "
              "at 100% | CPU share SD at 50% | at 100% |\n"
              "|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "uniformity.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "uniformity.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(report)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evoscale", default=os.path.join(ROOT, "build", "bin", "evoscale"))
    parser.add_argument("--traces", default=os.path.join(
        ROOT, "..", "shared", "data", "traces", "alibaba-gpu-2023"))
    parser.add_argument("--seeds", default="42-51")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--trace-names", default=",".join(TRACES))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", default=HERE)
    parser.add_argument("--departures", action="store_true")
    parser.add_argument("--departure-nodes", default="24,16,12")
    parser.add_argument("--uniformity", action="store_true")
    args = parser.parse_args()
    if args.uniformity:
        return run_uniformity(args)
    if args.departures:
        return run_departures(args)
    policies = args.policies.split(",")
    traces = args.trace_names.split(",")
    jobs = [(t, p, s) for t in traces for p in policies for s in seeds_of(args.seeds)]
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        runs = list(pool.map(lambda j: run_one(args.evoscale, args.traces, *j), jobs))
    total = time.monotonic() - start
    text, medians = table(runs, traces, policies)
    seeds = seeds_of(args.seeds)
    timing = []
    for policy in policies:
        mine = [r for r in runs if r["trace"] == "default" and r["policy"] == policy]
        if mine:
            timing.append(f"| {policy} | {sum(r['replay_seconds'] for r in mine):.1f} | "
                          f"{sum(r['process_seconds'] for r in mine):.1f} |")
    report = (f"Seeds {seeds[0]}-{seeds[-1]} (median), tune 1.3, unallocated GPU % at 100% and "
              f"130% of arrival.\n\n{text}\n\nWall time of the {len(seeds)}-seed replays of the "
              "default trace, one process per seed, sequential seconds (replay alone | whole "
              "process: reading the CSVs, JSON):\n\n| policy | replay s | process s |\n"
              f"|---|---|---|\n" + "\n".join(timing) +
              f"\n\nAll {len(jobs)} runs took {total:.0f} s on {args.jobs} workers.\n")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.md"), "w") as f:
        f.write(report)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump([{k: v for k, v in r.items() if k not in ("curve", "gpu_sd", "cpu_sd")}
                   for r in runs], f, indent=1)
    curves = median_curves(runs, "default", policies)
    if curves:
        arrivals = sorted(set.intersection(*(set(a for a, _ in c) for c in curves.values())))
        with open(os.path.join(args.out, "default.csv"), "w") as f:
            f.write("arrived_percent," + ",".join(curves) + "\n")
            for a in arrivals:
                values = [dict(c)[a] for c in curves.values()]
                f.write(f"{a}," + ",".join(f"{v:.3f}" for v in values) + "\n")
        write_svg(os.path.join(args.out, "default.svg"), curves,
                  f"openb default trace: median unallocated GPU % over seeds "
                  f"{seeds[0]}-{seeds[-1]}")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
