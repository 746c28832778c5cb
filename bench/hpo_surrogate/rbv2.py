"""YAHPO Gym's rbv2_xgboost surrogate as a benchmark space: the search space, its encoding for
the ONNX graph, a cached evaluator, the same space as an evoscale StudySpec and as an Optuna
define-by-run suggest, and the per-task normalisation of auc.

The space (config_space.json): booster in {gblinear, gbtree, dart}; nrounds, lambda, alpha,
subsample and the imputation method always; eta, gamma, max_depth, min_child_weight,
colsample_bytree and colsample_bylevel only for gbtree and dart; rate_drop and skip_drop only for
dart. task_id is fixed by the run, repl at 10, and trainsize is the fidelity (the simulator's).
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("EVOSCALE_SHARED", os.path.join(os.path.dirname(ROOT), "shared"))
DATA = os.path.join(SHARED, "data", "hpo-surrogates", "rbv2_xgboost")
REPL = 10  # the resampling replicate, fixed
MIN_TRAINSIZE = 0.03

BOOSTERS = ("gblinear", "gbtree", "dart")
IMPUTE = ("impute.mean", "impute.median", "impute.hist")
TREE = ("gbtree", "dart")  # the boosters that have tree parameters


@dataclass(frozen=True)
class Param:
    name: str
    kind: str  # "float", "int", "cat"
    low: float = 0.0
    high: float = 0.0
    log: bool = False
    choices: Tuple[str, ...] = ()
    active_for: Optional[Tuple[str, ...]] = None  # booster values; None = always active


def _load_space() -> List[Param]:
    with open(os.path.join(DATA, "config_space.json")) as f:
        cs = json.load(f)
    conditions: Dict[str, Tuple[str, ...]] = {}
    for c in cs["conditions"]:
        assert c["parent"] == "booster", c
        conditions[c["child"]] = tuple(c["values"]) if c["type"] == "IN" else (c["value"],)
    params = []
    for h in cs["hyperparameters"]:
        name = h["name"]
        if name in ("task_id", "trainsize", "repl"):
            continue  # fixed by the run, the fidelity, fixed at REPL
        if h["type"] == "categorical":
            params.append(Param(name, "cat", choices=tuple(h["choices"]),
                                active_for=conditions.get(name)))
        elif h["type"] == "constant":
            continue  # none in this space; a constant would be fed as its value
        else:
            kind = "int" if h["type"] == "uniform_int" else "float"
            params.append(Param(name, kind, float(h["lower"]), float(h["upper"]),
                                bool(h.get("log", False)), active_for=conditions.get(name)))
    # Parents first (booster), so that define-by-run and the StudySpec see the same order.
    params.sort(key=lambda p: (p.active_for is not None, len(p.active_for or ()) == 1, p.name))
    return params


SPACE: List[Param] = _load_space()
BY_NAME = {p.name: p for p in SPACE}
assert BY_NAME["booster"].choices == BOOSTERS and set(BY_NAME["num.impute.selected.cpo"].choices) == set(IMPUTE)

# x_cont's columns (README): the order the graph expects.
CONT = ("nrounds", "eta", "gamma", "lambda", "alpha", "subsample", "max_depth", "min_child_weight",
        "colsample_bytree", "colsample_bylevel", "rate_drop", "skip_drop", "trainsize", "repl")
with open(os.path.join(DATA, "encoding.json")) as _f:
    ENCODING = json.load(_f)


def active(p: Param, config: Dict[str, object]) -> bool:
    return p.active_for is None or config.get("booster") in p.active_for


def canonical(config: Dict[str, object]) -> Dict[str, object]:
    """The configuration's active parameters, ints rounded and values clipped to the bounds
    (what the surrogate is fed), in SPACE order."""
    out: Dict[str, object] = {}
    for p in SPACE:
        if not active(p, {**config, **out}):
            continue
        v = config[p.name]
        if p.kind == "cat":
            assert v in p.choices, (p.name, v)
        elif p.kind == "int":
            v = int(min(max(round(float(v)), p.low), p.high))
        else:
            v = float(min(max(float(v), p.low), p.high))
        out[p.name] = v
    return out


def key(config: Dict[str, object]) -> tuple:
    return tuple(sorted(canonical(config).items()))


def encode(task: str, config: Dict[str, object], trainsizes: Sequence[float]):
    """x_cat int32 [n, 3], x_cont float32 [n, 14] for one configuration at several trainsizes;
    inactive conditionals are fed as 0."""
    c = canonical(config)
    n = len(trainsizes)
    x_cat = np.zeros((n, 3), np.int32)
    x_cat[:, 0] = ENCODING["task_id"][task]
    x_cat[:, 1] = ENCODING["booster"][c["booster"]]
    x_cat[:, 2] = ENCODING["num.impute.selected.cpo"][c["num.impute.selected.cpo"]]
    x_cont = np.zeros((n, len(CONT)), np.float32)
    for j, name in enumerate(CONT[:-2]):
        if name in c:
            x_cont[:, j] = float(c[name])
    x_cont[:, CONT.index("trainsize")] = trainsizes
    x_cont[:, CONT.index("repl")] = REPL
    return x_cat, x_cont


def sample(rng: np.random.Generator) -> Dict[str, object]:
    """A configuration drawn at random (uniform, on the log scale where the space says)."""
    config: Dict[str, object] = {}
    for p in SPACE:
        if not active(p, config):
            continue
        if p.kind == "cat":
            config[p.name] = p.choices[int(rng.integers(len(p.choices)))]
        elif p.log:
            v = math.exp(rng.uniform(math.log(p.low), math.log(p.high)))
            config[p.name] = int(min(max(round(v), p.low), p.high)) if p.kind == "int" else v
        elif p.kind == "int":
            config[p.name] = int(rng.integers(int(p.low), int(p.high) + 1))
        else:
            config[p.name] = float(rng.uniform(p.low, p.high))
    return config


# ---- the surrogate, cached ------------------------------------------------------------------

def trainsizes(max_step: int) -> List[float]:
    """f_s = max(0.03, s / S), s = 1..S."""
    return [max(MIN_TRAINSIZE, s / max_step) for s in range(1, max_step + 1)]


class Curve:
    """One configuration on one task at every step: auc[s-1] and the cumulative cost[s-1]
    (core-seconds to reach step s: the running max of timetrain over f_1..f_s, capped at
    timetrain(f=1) so that a full run costs what the surrogate says a full run costs)."""

    __slots__ = ("auc", "cost", "timetrain", "full_cost")

    def __init__(self, auc: np.ndarray, timetrain: np.ndarray) -> None:
        self.auc = [float(a) for a in auc]
        self.timetrain = [float(t) for t in timetrain]
        self.full_cost = self.timetrain[-1]
        self.cost = [min(float(c), self.full_cost) for c in np.maximum.accumulate(timetrain)]


class Evaluator:
    """The surrogate over one task at the S fidelities of the simulator: the first time a
    configuration is drawn its S rows are evaluated in one call and kept; the simulator reveals
    a step's value only when it reaches that step."""

    def __init__(self, task: str, max_step: int, surrogate=None) -> None:
        self.task = task
        self.fidelities = trainsizes(max_step)
        self.surrogate = surrogate or load_surrogate()
        self.cache: Dict[tuple, Curve] = {}
        self.calls = 0

    def curve(self, config: Dict[str, object]) -> Curve:
        k = key(config)
        c = self.cache.get(k)
        if c is None:
            with np.errstate(over="ignore"):  # the graph's Sigmoid saturates
                y = self.surrogate(*encode(self.task, config, self.fidelities))
            self.calls += 1
            c = Curve(y[:, 2], y[:, 6])
            self.cache[k] = c
        return c

    def curves(self, configs: Sequence[Dict[str, object]]) -> List[Curve]:
        """Several configurations in one call (for the budget's reference median)."""
        n = len(self.fidelities)
        xs = [encode(self.task, c, self.fidelities) for c in configs]
        with np.errstate(over="ignore"):
            y = self.surrogate(np.concatenate([x[0] for x in xs]),
                               np.concatenate([x[1] for x in xs]))
        return [Curve(y[i * n:(i + 1) * n, 2], y[i * n:(i + 1) * n, 6]) for i in range(len(configs))]


_SURROGATE = None


def load_surrogate():
    global _SURROGATE
    if _SURROGATE is None:
        sys.path.insert(0, os.path.join(SHARED, "bench", "hpo"))
        from yahpo_onnx import Surrogate  # noqa: E402 (the shared numpy evaluator)
        _SURROGATE = Surrogate(os.path.join(DATA, "model.onnx"))
    return _SURROGATE


def reference_cost(task: str, n: int = 1000, seed: int = 20260) -> float:
    """M: the median over n random configurations (fixed seed) of the full-run cost on `task`
    (timetrain at trainsize 1; one batched call)."""
    rng = np.random.default_rng(seed)
    xs = [encode(task, sample(rng), [1.0]) for _ in range(n)]
    with np.errstate(over="ignore"):
        y = load_surrogate()(np.concatenate([x[0] for x in xs]), np.concatenate([x[1] for x in xs]))
    return float(np.median(y[:, 6]))


# ---- normalisation ---------------------------------------------------------------------------

def auc_stats() -> Dict[str, Tuple[float, float]]:
    """task -> (auc min, auc max) from instance_target_statistics.csv."""
    stats: Dict[str, Dict[str, float]] = {}
    with open(os.path.join(DATA, "instance_target_statistics.csv")) as f:
        for r in csv.DictReader(f):
            if r["metric"] == "auc":
                stats.setdefault(r["instance"], {})[r["statistic"]] = float(r["value"])
    return {t: (s["min"], s["max"]) for t, s in stats.items()}


def regret(task: str, best_auc: Optional[float], stats=None) -> float:
    """(max - best) / (max - min) with the task's statistics; 1.0 when there is no best."""
    lo, hi = (stats or auc_stats())[task]
    if best_auc is None:
        return 1.0
    return (hi - best_auc) / (hi - lo)


# ---- the space for evoscale and Optuna -------------------------------------------------------

def _evoscale_param(pb, p: Param):
    spec = pb.ParameterSpec(name=p.name)
    if p.kind == "cat":
        spec.categorical_spec.values.extend(p.choices)
    elif p.kind == "int":
        spec.integer_spec.min = int(p.low)
        spec.integer_spec.max = int(p.high)
    else:
        spec.double_spec.min = p.low
        spec.double_spec.max = p.high
    if p.log:
        spec.scale = pb.ParameterSpec.LOG
    return spec


def evoscale_parameters(pb) -> list:
    """The space as evoscale ParameterSpecs (pb: evoscale.v1.study_pb2): booster with one
    ConditionalParameterSpec child per conditional parameter, LOG where the space says."""
    top = []
    booster = None
    for p in SPACE:
        if p.active_for is None:
            spec = _evoscale_param(pb, p)
            top.append(spec)
            if p.name == "booster":
                booster = spec
    assert booster is not None
    for p in SPACE:
        if p.active_for is not None:
            booster.children.append(pb.ParameterSpec.ConditionalParameterSpec(
                parent_categorical_values=list(p.active_for), parameter_spec=_evoscale_param(pb, p)))
    return top


def from_evoscale(trial) -> Dict[str, object]:
    """A configuration from an evoscale Trial's parameters."""
    config: Dict[str, object] = {}
    for q in trial.parameters:
        which = q.WhichOneof("value")
        config[q.name] = getattr(q, which)
    return config


def optuna_suggest(trial) -> Dict[str, object]:
    """The same space, define-by-run, for an optuna.Trial."""
    config: Dict[str, object] = {}
    for p in SPACE:
        if not active(p, config):
            continue
        if p.kind == "cat":
            config[p.name] = trial.suggest_categorical(p.name, list(p.choices))
        elif p.kind == "int":
            config[p.name] = trial.suggest_int(p.name, int(p.low), int(p.high), log=p.log)
        else:
            config[p.name] = trial.suggest_float(p.name, p.low, p.high, log=p.log)
    return config
