#!/usr/bin/env bash
# Validates the Kubernetes manifests offline: every *.yaml and *.yml under
# deploy/kubernetes/ (or the files and folders given), each document against
# the Kubernetes API's JSON schema, strictly (an unknown field is an error),
# with the PyPI package kubernetes-validate, which bundles the schemas. Then
# what the schema cannot see: every Indexed Job's containers set
# JOB_COMPLETIONS to its .spec.completions (the shard count the programs
# read), and every `sh -c` script parses (sh -n).
#
#   scripts/validate-manifests.sh                every manifest of
#                                                deploy/kubernetes/
#   scripts/validate-manifests.sh PATH...        these files, or the
#                                                manifests under these
#                                                folders
#   scripts/validate-manifests.sh -k 1.31.0 ...  against this Kubernetes
#                                                version (repeatable)
#                                                [default: 1.30.0 and the
#                                                newest the validator knows]
#
# kubernetes-validate is run from a venv, $KUBERNETES_VALIDATE_VENV
# (default ~/.cache/retry-storm/kubernetes-validate), made and filled with
# `pip install kubernetes-validate==1.37.0` on first use: the only network
# access, to PyPI (or pip's configured index), once. It knows Kubernetes
# 1.25 to 1.37. A document whose kind or apiVersion it has no schema for
# (a typo, or a custom resource) fails here, where the tool itself only
# warns.
# Exits 1 if a manifest is invalid, 2 on a usage or setup error.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }

kv_pin="kubernetes-validate==1.37.0"
venv=${KUBERNETES_VALIDATE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/retry-storm/kubernetes-validate}
versions=()
paths=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -k|--kubernetes-version)
      [[ $# -ge 2 ]] || { usage >&2; exit 2; }
      versions+=("$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    *) paths+=("$1"); shift ;;
  esac
done
[[ ${#paths[@]} -gt 0 ]] || paths=(deploy/kubernetes)

py="$venv/bin/python"
if ! "$py" -c 'import kubernetes_validate' 2>/dev/null; then
  echo "installing $kv_pin into $venv" >&2
  { python3 -m venv "$venv" && "$py" -m pip install --quiet "$kv_pin"; } >&2 \
    || { echo "could not install $kv_pin into $venv" >&2; exit 2; }
fi
kv_version=$("$py" -c 'from kubernetes_validate.version import __version__; print(__version__)')
if [[ ${#versions[@]} -eq 0 ]]; then
  newest=$("$py" -c 'from kubernetes_validate.utils import latest_version; print(latest_version())')
  versions=(1.30.0)
  [[ $newest == 1.30.0 ]] || versions+=("$newest")
fi

files=()
for p in "${paths[@]}"; do
  if [[ -d $p ]]; then
    while IFS= read -r -d '' f; do files+=("$f"); done \
      < <(find "$p" -type f \( -name '*.yaml' -o -name '*.yml' \) -print0 | sort -z)
  elif [[ -f $p ]]; then
    files+=("$p")
  else
    echo "no such file or folder: $p" >&2; exit 2
  fi
done
[[ ${#files[@]} -gt 0 ]] || { echo "no manifest (*.yaml, *.yml) in ${paths[*]}" >&2; exit 2; }

echo "kubernetes-validate $kv_version, --strict, Kubernetes ${versions[*]}: ${#files[@]} files"
failed=0
kflags=()
for v in "${versions[@]}"; do kflags+=(-k "$v"); done
for f in "${files[@]}"; do
  # --quiet: only warnings and failures. It exits 0 on a WARN (no schema for
  # the kind), 2 on a file it cannot read or parse (it may print nothing
  # then but on stderr): any of these fails the file here.
  set +e
  out=$("$py" -m kubernetes_validate --strict --quiet "${kflags[@]}" "$f" 2>&1)
  rc=$?
  set -e
  if [[ $rc -ne 0 || -n $out ]]; then
    failed=1
    echo "FAIL  $f"
    [[ -z $out ]] || sed 's/^/      /' <<<"$out"
  else
    echo "ok    $f"
  fi
done

# What the schema cannot check, on the same YAML reader (PyYAML, which
# kubernetes-validate brings).
if ! "$py" - "${files[@]}" <<'EOF'
import subprocess
import sys

import yaml

bad = False
for path in sys.argv[1:]:
    try:
        with open(path, encoding="utf-8") as f:
            docs = [d for d in yaml.safe_load_all(f) if d]
    except (OSError, yaml.YAMLError):
        continue  # reported by kubernetes-validate above
    for doc in docs:
        if not isinstance(doc, dict):
            continue
        kind = doc.get("kind")
        name = (doc.get("metadata") or {}).get("name", "?")
        spec = doc.get("spec") or {}
        if kind == "Job":
            pod = (spec.get("template") or {}).get("spec") or {}
        elif kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"):
            pod = (spec.get("template") or {}).get("spec") or {}
        elif kind == "Pod":
            pod = spec
        else:
            continue
        containers = (pod.get("initContainers") or []) + (pod.get("containers") or [])
        if kind == "Job" and spec.get("completionMode") == "Indexed":
            want = str(spec.get("completions"))
            for c in pod.get("containers") or []:
                got = [e.get("value") for e in c.get("env") or []
                       if e.get("name") == "JOB_COMPLETIONS"]
                if got != [want]:
                    print(f"FAIL  {path}: Job {name}, container {c.get('name')}: "
                          f"JOB_COMPLETIONS is {got[0] if got else 'not set'}, "
                          f"completions is {want}")
                    bad = True
        for c in containers:
            cmd = (c.get("command") or []) + (c.get("args") or [])
            if len(cmd) >= 3 and cmd[0] in ("sh", "/bin/sh") and cmd[1] == "-c":
                r = subprocess.run(["sh", "-n", "-c", cmd[2]],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"FAIL  {path}: {kind} {name}, container "
                          f"{c.get('name')}: its sh -c script does not parse: "
                          f"{r.stderr.strip()}")
                    bad = True
sys.exit(1 if bad else 0)
EOF
then
  failed=1
fi

if [[ $failed -ne 0 ]]; then
  echo "invalid manifests" >&2
  exit 1
fi
echo "all valid"
