#!/usr/bin/env python3
"""Writes dev/e2e/tests/trainer_v2_examples.json: upstream's answer to every Trainer v2.3
example manifest, from the objects the API server hands the webhooks.

Input: target/e2e-trainer-v2/defaulted.json, written by the e2e test
(`cargo test -p e2e --test trainer_v2`) before it registers ours. Each runtime goes to its
validator unless its labels opt out (the webhooks' objectSelector: webhook-validation=disabled);
each TrainJob goes to the defaulter, then, patched, to the validator with every admitted runtime
as cluster state. Answers come from upstream's handlers (`./build.sh /tmp/trainer-oracle`).

    ./examples.py /tmp/trainer-oracle
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../..")
IN = os.path.join(ROOT, "target/e2e-trainer-v2/defaulted.json")
OUT = os.path.join(ROOT, "dev/e2e/tests/trainer_v2_examples.json")
PATHS = {
    "TrainingRuntime": "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime",
    "ClusterTrainingRuntime": "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime",
}
MUTATE = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"


def review(obj):
    kind = obj["kind"]
    req = {"uid": "u", "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": kind},
           "resource": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "resource": kind.lower() + "s"},
           "name": obj["metadata"]["name"], "operation": "CREATE", "userInfo": {"username": "e2e"}, "object": obj}
    if "namespace" in obj["metadata"]:
        req["namespace"] = obj["metadata"]["namespace"]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def answer(binary, path, obj, state=()):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"path": path, "state": list(state), "review": review(obj)}, f)
    try:
        return json.loads(subprocess.check_output([binary, "answer", f.name]))[f.name]
    finally:
        os.remove(f.name)


def apply_patch(obj, ops):
    """The few JSON Patch ops upstream's defaulter sends: add and replace."""
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        cur = obj
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        last = parts[-1]
        if isinstance(cur, list):
            cur.insert(int(last), op["value"]) if op["op"] == "add" else cur.__setitem__(int(last), op["value"])
        else:
            cur[last] = op["value"]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "/tmp/trainer-oracle"
    defaulted = json.load(open(IN))
    out, state = {}, []
    for ex, v in sorted(defaulted.items()):
        if "object" not in v or v["object"]["kind"] == "TrainJob":
            continue
        obj = v["object"]
        if obj["metadata"].get("labels", {}).get("trainer.kubeflow.org/webhook-validation") == "disabled":
            a = {"allowed": True}
        else:
            a = answer(binary, PATHS[obj["kind"]], obj)
        out[ex] = expectation(a)
        if a["allowed"]:
            state.append(obj)
    for ex, v in sorted(defaulted.items()):
        if "object" not in v or v["object"]["kind"] != "TrainJob":
            continue
        obj = json.loads(json.dumps(v["object"]))
        m = answer(binary, MUTATE, obj)
        if not m["allowed"]:
            out[ex] = expectation(m)
            continue
        apply_patch(obj, m.get("patch") or [])
        a = answer(binary, VALIDATE, obj, state)
        e = expectation(a)
        if a["allowed"] and m.get("patch"):
            e["set"] = {op["path"]: op["value"] for op in m["patch"]}
        out[ex] = e
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print("%d answers in %s" % (len(out), os.path.normpath(OUT)))


def expectation(a):
    if a.get("error"):
        sys.exit(a["error"])
    e = {"allowed": a["allowed"]}
    if not a["allowed"]:
        e["message_contains"] = [a.get("message", "")]
    if a.get("warnings"):
        e["warnings"] = a["warnings"]
    return e


if __name__ == "__main__":
    main()
