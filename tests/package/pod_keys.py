#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Every key of every pod template in rendered manifests (kubectl kustomize), and of every Pod, is a field name of the
# Kubernetes types podman decodes them into: the `json:"name"` tags its binary carries. podman 4.3
# ignores keys it does not know when it plays a pod, so a misspelt key (readinesProbe) would pass
# it and fail only in a cluster; this fails it here (tests/package/test_image.sh). Keys under
# free-form maps (labels, annotations, matchLabels, resource quantities) are not field names and
# are not checked.
#   pod_keys.py PODMAN_BINARY RENDERED.yaml...
import re
import sys

import yaml

known = set(m.decode() for m in re.findall(rb'json:"([A-Za-z0-9]+)', open(sys.argv[1], "rb").read()))
free_form = {"labels", "annotations", "matchLabels", "nodeSelector", "requests", "limits", "data", "stringData"}
unknown = []


def walk(node, path):
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in known:
                unknown.append(f"{path}.{k}")
            if k not in free_form:
                walk(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            walk(v, f"{path}[{i}]")


templates = 0
for f in sys.argv[2:]:
    for d in yaml.safe_load_all(open(f)):
        if d and d.get("kind") in ("StatefulSet", "Deployment", "DaemonSet", "Job"):
            templates += 1
            walk(d["spec"]["template"], f"{f}: {d['kind']}/{d['metadata']['name']}.spec.template")
        elif d and d.get("kind") == "Pod":
            templates += 1
            walk({"metadata": d["metadata"], "spec": d["spec"]}, f"{f}: Pod/{d['metadata']['name']}")
if not templates:
    sys.exit("pod_keys: no pod template in " + " ".join(sys.argv[2:]))
if unknown:
    sys.exit("pod_keys: not fields of a pod template (misspelt?):\n  " + "\n  ".join(unknown))
print(f"pod_keys: every key of {templates} pod templates is a field name")
