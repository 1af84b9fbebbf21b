#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# The pod the core's StatefulSet would make, for `podman kube play` (tests/package/test_image.sh):
# from a rendered overlay (kubectl kustomize), the StatefulSet's pod template as a Pod named NAME,
# its corestream image replaced by IMAGE, each volume claim template as a claim CLAIM, preceded
# by the ConfigMaps the overlay renders (the pod reads its flags from one) and by a Secret for
# each secret volume, renamed NAME-<secretName> (podman keeps Secrets as its own, machine-wide
# secrets) and holding a placeholder (the flags that read them are off in the overlays).
#   sts_pod.py RENDERED.yaml NAME IMAGE CLAIM > pod.yaml
import sys

import yaml

rendered, name, image, claim = sys.argv[1:5]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
sts = [d for d in docs if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "corestreamd"]
if len(sts) != 1:
    sys.exit("sts_pod: no StatefulSet corestreamd in " + rendered)
template = sts[0]["spec"]["template"]
spec = template["spec"]
for c in spec["containers"]:
    if c["image"].split(":")[0].endswith("/corestream"):
        c["image"] = image
volumes = spec.setdefault("volumes", [])
for t in sts[0]["spec"].get("volumeClaimTemplates", []):
    volumes.append({"name": t["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim}})
secrets = []
for v in volumes:
    if "secret" in v:
        v["secret"]["secretName"] = name + "-" + v["secret"]["secretName"]
        secrets.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": v["secret"]["secretName"]},
                        "stringData": {"placeholder": "not read"}})
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": name, "labels": template["metadata"].get("labels", {})}, "spec": spec}
out = [d for d in docs if d["kind"] == "ConfigMap"] + secrets + [pod]
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
