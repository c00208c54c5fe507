#!/usr/bin/env python3
"""Differences between upstream's Trainer v2.3 handlers and training-webhook on case files.

    cargo xtask variants trainer-v2 /tmp/tv
    ./compare.py /tmp/trainer-oracle target/debug/training-webhook /tmp/tv/*.json

Compared: the decision, the refusal's code and text (as a set of field errors where upstream's
plugin order varies; not the decoder's words, Q-9), the warnings, and the object after each side's patch. Upstream's 500
answers for what the CRD refuses (spec F-1) are listed apart.
"""
import base64
import json
import re
import subprocess
import sys
import tempfile

CLOCK = "2026-01-01T00:00:00Z"


def errors_of(message):
    if message.startswith("[") and message.endswith("]"):
        return sorted(re.split(r", (?=spec\.|metadata\.)", message[1:-1]))
    return [message]


def apply(obj, ops):
    import copy
    obj = copy.deepcopy(obj)
    for op in ops or []:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        cur = obj
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        last = parts[-1]
        if op["op"] == "remove":
            del cur[int(last) if isinstance(cur, list) else last]
        elif isinstance(cur, list):
            if op["op"] == "add":
                cur.insert(len(cur) if last == "-" else int(last), op["value"])
            else:
                cur[int(last)] = op["value"]
        else:
            cur[last] = op["value"]
    return obj


def ours(binary, case):
    with tempfile.NamedTemporaryFile("w", suffix=".json") as st:
        json.dump({"apiVersion": "v1", "kind": "List", "items": case.get("state", [])}, st)
        st.flush()
        p = subprocess.run([binary, "review", "--path", case["path"], "--state", st.name,
                            "--trainjob-clock", CLOCK],
                           input=json.dumps(case["review"]).encode(), capture_output=True)
    if p.returncode != 0:
        return {"error": p.stderr.decode()[:300]}
    r = json.loads(p.stdout)["response"]
    a = {"allowed": r["allowed"], "warnings": r.get("warnings") or []}
    s = r.get("status") or {}
    a["code"], a["message"] = s.get("code"), s.get("message", "")
    a["patch"] = json.loads(base64.b64decode(r["patch"])) if r.get("patch") else None
    return a


def strip_metadata(obj):
    return {k: v for k, v in obj.items() if k != "metadata"}


def has_duplicate_keys(text):
    """Whether an object of the JSON text repeats a key (the case files keep a variant's text)."""
    found = []

    def pairs(items):
        keys = [k for k, _ in items]
        if len(keys) != len(set(keys)):
            found.append(True)
        return dict(items)
    json.loads(text, object_pairs_hook=pairs)
    return bool(found)


def unsent(case, o):
    """Why a variant is one the API server never sends (spec Q-10), or None."""
    if case.get("duplicate_keys"):
        return "duplicate JSON keys"
    r = case["review"].get("request") or {}
    if o.get("error", "").find("cannot decode the AdmissionReview") >= 0:
        return "an AdmissionReview envelope that does not decode"
    res = r.get("resource")
    if not isinstance(res, dict) or res.get("group") != "trainer.kubeflow.org" or not str(res.get("resource", "")).endswith("s") \
            or res.get("resource") not in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        return "a review for a resource other than the endpoint's"
    if r.get("operation") not in ("CREATE", "UPDATE"):
        return "an operation the webhook configurations do not send"
    if r.get("operation") == "UPDATE" and r.get("oldObject") is None:
        return "an UPDATE without its stored object"
    return None


def main():
    oracle, binary, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    theirs = {}
    for i in range(0, len(files), 200):
        theirs.update(json.loads(subprocess.check_output([oracle, "answer"] + files[i:i + 200])))
    diffs, crd_refused, same, decode = [], 0, 0, 0
    explained = {}
    for f in files:
        text = open(f).read()
        case = json.loads(text)
        case["duplicate_keys"] = has_duplicate_keys(text)
        t, o = theirs[f], ours(binary, case)
        why = unsent(case, o)
        if why:
            explained[why] = explained.get(why, 0) + 1
            continue
        if (not t["allowed"] and not o.get("allowed", True) and t.get("code") == o.get("code")
                and re.match(r"json: cannot unmarshal|parsing time", t.get("message", ""))):
            # The defaulter's own decoding of the stored object, refused in Go's words.
            decode += 1
            continue
        if t.get("error") or o.get("error"):
            if t.get("http") == 400 or t.get("error"):
                # Both refuse to decode: compare only that both did.
                if o.get("error") or (not o["allowed"] and o.get("code") == 400):
                    same += 1
                    continue
            diffs.append((f, "error", t, o))
            continue
        if t.get("code") == 500 and "panic" in t.get("message", ""):
            crd_refused += 1
            if o["allowed"]:
                diffs.append((f, "upstream panics, ours admits", t, o))
            continue
        if not t["allowed"] and not o["allowed"] and t.get("code") == 400 and o.get("code") == 400:
            # Both refuse to decode; the text is Go's decoder's or serde's (spec Q-9).
            decode += 1
            continue
        problems = []
        if t["allowed"] != o["allowed"]:
            problems.append("decision")
        elif not t["allowed"]:
            if (t.get("code") or 403) != (o.get("code") or 403):
                problems.append("code")
            if errors_of(t.get("message", "")) != errors_of(o["message"]):
                problems.append("message")
        if (t.get("warnings") or []) != o["warnings"]:
            problems.append("warnings")
        obj = case["review"]["request"].get("object")
        if t["allowed"] and obj is not None and apply(obj, t.get("patch")) != apply(obj, o["patch"]):
            if obj.get("metadata") is not None or strip_metadata(apply(obj, t.get("patch"))) != strip_metadata(apply(obj, o["patch"])):
                problems.append("patch")
            else:
                # Go adds `metadata: {}` to an object without one; our diff leaves empty
                # additions out (the API server always sends metadata).
                explained["an object without metadata"] = explained.get("an object without metadata", 0) + 1
                continue
        if problems:
            diffs.append((f, ",".join(problems), t, o))
        else:
            same += 1
    for f, what, t, o in diffs:
        print("DIFF %s (%s)\n  upstream: %s\n  ours:     %s" % (f, what, json.dumps(t)[:600], json.dumps(o)[:600]))
    for why, n in sorted(explained.items()):
        print("%d: %s (Q-10)" % (n, why))
    print("%d cases: %d same, %d both refuse to decode (Q-9), %d upstream panics on what the CRD refuses (F-1), %d differ"
          % (len(files), same, decode, crd_refused, len(diffs)))
    sys.exit(1 if diffs else 0)


if __name__ == "__main__":
    main()
