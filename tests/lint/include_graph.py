#!/usr/bin/env python3
"""Checks the include graph of the project's own code.

1. No include cycle, between files or between units (a unit is x.h with its x.cc / x.cu): no
   unit includes, directly or through others, a unit that includes it.
2. Layering: a file in one module includes only headers of the modules that module may use,
   as the README's Architecture section draws them (arrows only point down).

usage: include_graph.py SOURCE_ROOT      exit 0 when both hold; else prints each violation.
"""
import os
import re
import sys

# Module -> the modules whose headers it may include (besides its own). Longest prefix wins.
ALLOWED = {
    "search/": set(),
    "load_model/": set(),
    "placement/": set(),
    "trainer/": set(),
    "trainer_adapter/": set(),
    "service/common/": set(),
    "serve/": {"trainer/", "service/common/"},
    "service/store/": {"service/common/"},
    "service/trial_template/": set(),
    "service/study/": {"search/", "service/store/", "service/common/", "service/trial_template/"},
    "service/autoscaler/": {"load_model/", "service/store/", "service/common/"},
    "service/scheduler/": {"service/study/", "service/store/", "service/common/", "search/",
                           "service/trial_template/", "trainer_adapter/", "load_model/"},
    "service/katib/": {"service/study/"},
    "service/extender/": {"placement/"},
    "service/analysis/": {"service/study/", "service/store/", "service/common/", "search/"},
    "service/cli/": {"load_model/", "placement/", "service/common/"},
    "service/": {"service/study/", "service/store/", "service/common/", "service/autoscaler/",
                 "service/scheduler/", "service/katib/", "service/analysis/", "service/extender/",
                 "service/trial_template/", "search/",
                 "load_model/", "trainer_adapter/"},
}
CODE_DIRS = ["search", "load_model", "placement", "trainer", "trainer_adapter", "service", "serve"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(path):
    best = None
    for prefix in ALLOWED:
        if path.startswith(prefix) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def main(root):
    files = []
    for top in CODE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in names:
                if name.endswith((".h", ".cc", ".cu", ".cuh")):
                    files.append(os.path.relpath(os.path.join(dirpath, name), root))
    known = set(files)
    graph = {}
    problems = []
    for f in sorted(files):
        with open(os.path.join(root, f), encoding="utf-8") as src:
            text = src.read()
        deps = [d for d in INCLUDE.findall(text) if d in known]
        graph[f] = deps
        mine = module_of(f)
        for d in deps:
            theirs = module_of(d)
            if theirs != mine and theirs not in ALLOWED[mine]:
                problems.append(f"layering: {f} ({mine}) includes {d} ({theirs})")

    # Units: x.h, x.cc and x.cu are one unit; an include is an edge between units.
    unit = lambda f: os.path.splitext(f)[0]
    units = {}
    for f, deps in graph.items():
        units.setdefault(unit(f), set()).update(unit(d) for d in deps if unit(d) != unit(f))
    find_cycles(graph, "file cycle", problems)
    find_cycles({u: sorted(d) for u, d in units.items()}, "unit cycle", problems)
    for p in problems:
        print(p)
    print(f"{len(files)} files, {sum(len(d) for d in graph.values())} includes, "
          f"{len(problems)} problems")
    return 1 if problems else 0


def find_cycles(graph, what, problems):
    """Appends each strongly connected component of more than one node (Tarjan)."""
    index, low, on_stack, stack, counter = {}, {}, set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph.get(v, []):
                problems.append(f"{what}: " + " <-> ".join(sorted(component)))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
