"""Draws replay_frontier's CSV as PNGs: each policy's curve over its risk setting, default
marked with a larger point.

usage: plot_frontier.py FRONTIER.csv OUT_DIR

Writes OUT_DIR/bitbrains_frontier.png (memory slack against OOM events and CPU slack against
under-provisioned samples; held-out, tuning and all VMs) and OUT_DIR/genai_frontier.png
(minutes over target against replica-hours, replicas serving at once and after 3 minutes).
Needs Debian's python3-matplotlib.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PARTS = ["held-out", "tuning", "all"]
STYLE = {"vpa": "tab:orange", "hpa": "tab:orange", "evoscale": "tab:blue",
         "evoscale, requests at p95": "tab:green"}


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def curve(ax, rows, x, y):
    policies = []
    for r in rows:
        if r["policy"] not in policies:
            policies.append(r["policy"])
    for p in policies:
        pts = [(float(r[x]), float(r[y]), r["default"] == "1") for r in rows if r["policy"] == p]
        pts.sort()
        color = STYLE.get(p, None)
        ax.plot([a for a, _, _ in pts], [b for _, b, _ in pts], "-o", ms=3, label=p, color=color)
        for a, b, d in pts:
            if d:
                ax.plot([a], [b], "o", ms=9, color=color, markeredgecolor="black")
    ax.grid(alpha=0.3)


def main():
    rows = load(sys.argv[1])
    out = sys.argv[2]
    os.makedirs(out, exist_ok=True)

    bb = [r for r in rows if r["trace"] == "bitbrains"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for j, part in enumerate(PARTS):
        sub = [r for r in bb if r["part"] == part]
        curve(axes[0][j], sub, "oom", "memory_slack")
        axes[0][j].set_title("Bitbrains VMs, %s: memory" % part)
        axes[0][j].set_xlabel("OOM events")
        axes[0][j].set_ylabel("memory slack on the request (sum over VMs)")
        curve(axes[1][j], sub, "under", "cpu_slack")
        axes[1][j].set_title("Bitbrains VMs, %s: CPU" % part)
        axes[1][j].set_xlabel("under-provisioned fraction of samples")
        axes[1][j].set_ylabel("CPU slack on the request (sum over VMs)")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Slack against risk, each policy over its risk setting (large dot: default; lower left is better)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "bitbrains_frontier.png"), dpi=90)

    ga = [r for r in rows if r["trace"] == "alibaba-genai"]
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5))
    for i, delay in enumerate(["0", "3"]):
        for j, part in enumerate(PARTS):
            sub = [r for r in ga if r["part"] == part and r["delay_minutes"] == delay]
            curve(axes[i][j], sub, "replica_hours", "minutes_over")
            axes[i][j].set_title("GenAI, %s, replicas start in %s min" % (part, delay))
            axes[i][j].set_xlabel("replica-hours")
            axes[i][j].set_ylabel("minutes over the 60% target")
    axes[0][0].legend(fontsize=8)
    fig.suptitle("Minutes over target against replica-hours (large dot: default; lower left is better)")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "genai_frontier.png"), dpi=90)
    print("wrote %s and %s" % (os.path.join(out, "bitbrains_frontier.png"),
                               os.path.join(out, "genai_frontier.png")))


if __name__ == "__main__":
    sys.exit(main())
