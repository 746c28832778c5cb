#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/NAME/ (committed).

Run from anywhere: python3 tests/fuzz/make_seeds.py. Needs protoc (spec_fuzz's seeds are
StudySpec messages in protobuf's binary form, encoded from text format).
"""
import pathlib
import struct
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"


def put(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


SPECS = {
    "double_log": 'metrics { name: "auc" goal: MAXIMIZE } '
                  'parameters { name: "lr" double_spec { min: 0.0001 max: 1 } scale: LOG }',
    "mixed": 'metrics { name: "logloss" goal: MINIMIZE } '
             'parameters { name: "dim" discrete_spec { values: 8 values: 16 values: 32 } } '
             'parameters { name: "layers" integer_spec { min: 1 max: 4 } } '
             'parameters { name: "opt" categorical_spec { values: "adagrad" values: "ftrl" } '
             '  children { parent_categorical_values: "ftrl" parameter_spec { name: "l1" '
             '  double_spec { min: 0.000001 max: 1 } scale: LOG } } } '
             'algorithm { algorithm: GENETIC seed: 42 settings { key: "population_size" value: "8" } }',
    "nsga2": 'metrics { name: "auc" goal: MAXIMIZE } metrics { name: "latency" goal: MINIMIZE } '
             'parameters { name: "x" double_spec { min: -1 max: 1 } } '
             'parameters { name: "n" integer_spec { min: 1 max: 1000 } scale: LOG } '
             'algorithm { algorithm: NSGA2 seed: 7 }',
    "grid": 'metrics { name: "m" goal: MAXIMIZE } '
            'parameters { name: "a" discrete_spec { values: 1 values: 2 } } '
            'parameters { name: "b" categorical_spec { values: "x" values: "y" } } '
            'algorithm { algorithm: GRID }',
    "evolution": 'metrics { name: "m" goal: MINIMIZE } '
                 'parameters { name: "a" double_spec { min: 0 max: 10 } scale: REVERSE_LOG } '
                 'algorithm { algorithm: REGULARIZED_EVOLUTION }',
    "random": 'metrics { name: "m" goal: MAXIMIZE } '
              'parameters { name: "a" integer_spec { min: -5 max: 5 } } '
              'algorithm { algorithm: QUASI_RANDOM seed: 3 }',
}


def spec_seeds():
    for name, text in SPECS.items():
        data = subprocess.run(
            ["protoc", f"--proto_path={ROOT / 'proto'}", "--encode=evoscale.v1.StudySpec",
             "evoscale/v1/study.proto"],
            input=text.encode(), capture_output=True, check=True).stdout
        put("spec_fuzz", name, data)


def study_file_seeds():
    for path in (ROOT / "examples").glob("*.yaml"):
        put("study_file_fuzz", path.name, path.read_text())
    put("study_file_fuzz", "bare_spec.yaml",
        "metrics: [{name: auc, goal: MAXIMIZE}]\n"
        "parameters:\n  - {name: lr, double_spec: {min: 0.001, max: 1}, scale: LOG}\n"
        "algorithm: {algorithm: GENETIC, settings: {population_size: 50}}\n")
    put("study_file_fuzz", "study.json",
        '{"displayName": "j", "spec": {"metrics": [{"name": "auc", "goal": "MAXIMIZE"}], '
        '"parameters": [{"name": "k", "integerSpec": {"min": "1", "max": "9"}}]}}')
    put("study_file_fuzz", "anchors.yaml",
        "display_name: &n x\nspec:\n  metrics: [{name: *n, goal: MINIMIZE}]\n"
        "  parameters: [{name: 'p', categorical_spec: {values: [\"a\", b, 0x1F, .inf, ~]}}]\n")


def trial_event_seeds():
    lines = [
        '{"event":"progress","step":100,"examples":102400,"elapsed_s":1.25,'
        '"metrics":{"logloss":0.4717,"auc":0.7318}}',
        '{"event":"final","examples_per_s":52938.5,"peak_rss_bytes":171800000,'
        '"metrics":{"auc":0.73,"logloss":null},"table":{"rows":12,"shard_rows":[6,6]}}',
        '{"event":"error","step":7,"code":"INTERNAL","message":"non-finite loss \\"nan\\""}',
        '{"event":"checkpoint","step":50,"examples":5,"full":true,"path":"/tmp/c\\u00e9/0005"}',
        '{"event":"progress","step":1e3,"metrics":{"a":-0.0,"b":1.7976931348623157e308}}',
    ]
    for i, line in enumerate(lines):
        put("trial_event_fuzz", f"line{i}", line)


def http_seeds():
    targets = [
        "/healthz", "/metrics", "/", "/app.js", "/style.css",
        "/api/v1/studies", "/api/v1/studies?page_size=1&page_token=1",
        "/api/v1/studies/1", "/api/v1/studies/1/trials?state=succeeded&page_size=2",
        "/api/v1/studies/1/trials/2", "/api/v1/studies/1/optimal_trials",
        "/api/v1/workloads", "/api/v1/workloads/default/ranker",
        "/api/v1/workloads/default/ranker/recommendation",
        "/api/v1/studies/1/trials?state=ACTIVE&page_token=%41%zz",
        "/api/v1/studies/1\nBearer reader-token-0123456789",
        "/metrics\nBearer wrong",
        "/api/v1/studies/1/analysis?max_points=10&max_curves=2&max_curve_points=2",
        "/api/v1/studies/1/analysis?metric=nope",
        "/api/v1/studies/1/trials?order_by=-metric:auc&param=lr:0.001..0.5&param=opt:adam|sgd&state=succeeded,stopped",
        "/api/v1/studies/1/trials?order_by=param:lr&param=lr:..&page_token=o:1",
        "/api/v1/studies/1/trials/1/usage?max_points=3",
        "/api/v1/workloads/default/ranker/history?max_points=2",
        "/uPlot.min.js", "/charts.js",
    ]
    for i, t in enumerate(targets):
        put("http_fuzz", f"target{i}", t)


def telemetry_seeds():
    put("telemetry_fuzz", "csv",
        "workload,instance,container,time,cpu_cores,memory_bytes,qps,latency_seconds,oom\n"
        "default/w,pod-0,server,1700000000,0.5,1e9,100,0.0125,false\n"
        "default/w,pod-0,envoy,1700000000,0.05,6e7,0,0,false\n"
        "default/w,pod-0,server,2023-11-14T22:14:20.5Z,0.7,1.1e9,120,0.013,0\n"
        "default/serving,pod-1,,1700000060,1.5,2e9,300,0.02,true\n")
    # The earlier columns: unix seconds and milliseconds.
    put("telemetry_fuzz", "csv_legacy",
        "workload,instance,timestamp,cpu_cores,memory_bytes,qps,latency_ms,oom\n"
        "default/w,pod-0,1700000000,0.5,1e9,100,12.5,false\n"
        "default/serving,pod-1,1700000060,1.5,2e9,300,20,true\n")
    put("telemetry_fuzz", "jsonl",
        '{"workload":"default/w","instance":"a","container":"c","time":1700000000,"cpu_cores":0.25}\n'
        '# a comment\n\n'
        '{"instance":"a","container":"c","time":"2023-11-14T22:13:50Z","memoryBytes":5e8,'
        '"gpuUtilization":0.5,"latencySeconds":0.02}\n'
        '{"instance":"a","timestamp":1700000030,"latency_ms":20}\n'
        '{"workload":"nope","instance":"b","timestamp":1700000030,"cpu_cores":-1}\n')


def checkpoint_seeds():
    # FuzzedDataProvider's strings end at "\" followed by another byte; "\\" is one backslash.
    def escaped(b):
        return b.replace(b"\\", b"\\\\") + b"\\x"

    dim, state = 4, 1
    manifest = ("format=evoscale-trainer-checkpoint-1\nstep=1\nexamples=64\nepoch=0\nrow=64\n"
                f"offset=4096\nshards=1\ndim={dim}\nstate_floats={state}\noptimizer=adagrad\n"
                "mlp_sizes=4,8,1\nfull=1\nchain=ckpt-000000000001\n").encode()
    rows = [(11, 1), (22, 1), (33, 0)]
    pending = [(44, 1)]
    shard = b"EVSROWS2" + struct.pack("<IIIIQQQ", 0, dim, state, 1, len(rows), 0, len(pending))
    for key, count in pending:
        shard += struct.pack("<QI", key, count)
    for key, last in rows:
        shard += struct.pack("<QI", key, last) + struct.pack(f"<{dim + state}f",
                                                            *[0.01 * key] * (dim + state))
    count = 37
    dense = (b"EVSDNSE1" + struct.pack("<Qq", count, 5) +
             struct.pack(f"<{3 * count}f", *[0.5] * (3 * count)))
    put("checkpoint_fuzz", "full", escaped(manifest) + escaped(shard) + dense)
    delta = manifest.replace(b"full=1", b"full=0")
    shard_delta = b"EVSROWS2" + struct.pack("<IIIIQQQ", 0, dim, state, 0, 1, 1, 0)
    shard_delta += struct.pack("<Q", 22) + struct.pack("<QI", 55, 2)
    shard_delta += struct.pack(f"<{dim + state}f", *[1.0] * (dim + state))
    put("checkpoint_fuzz", "delta", escaped(delta) + escaped(shard_delta) + dense)


if __name__ == "__main__":
    spec_seeds()
    study_file_seeds()
    trial_event_seeds()
    http_seeds()
    telemetry_seeds()
    checkpoint_seeds()
