# Shell functions shared by the scripts that storm a real server through
# kinds of outage, one fresh server a kind (scripts/gunicorn-check.sh,
# scripts/grpc-storm-check.sh): sourced by them, not run.

# The storm's fault proxy's kinds, as its --outage writes them (the storm
# checks the values itself): stall, blackhole, reset, status=CODE (an
# HTTP status, or a gRPC status by name, answered Trailers-Only to gRPC
# requests) with an optional ,retry-after=D, delay=D; each optionally
# followed by ,fraction=F.
outage_duration='[0-9][0-9a-z.]*'
proxy_kind="^(stall|blackhole|reset|status=([0-9]{3}|[A-Za-z_-]+)(,retry-after=$outage_duration)?|delay=$outage_duration)(,fraction=[0-9.]+)?$"

# A kind's folder name: '=' and ',' as '-'.
name_of() { local n=${1//=/-}; echo "${n//,/-}"; }

# Exits 2 if two of the kinds given would share a folder (a kind given
# twice).
refuse_twice() {
  local kind name
  declare -A seen=()
  for kind in "$@"; do
    name=$(name_of "$kind")
    [[ -z ${seen[$name]:-} ]] || { echo "--outage $kind: given twice" >&2; exit 2; }
    seen[$name]=1
  done
}

# Arguments as a shell reads them back: single-quoted where needed.
quote() {
  local arg line=""
  for arg in "$@"; do
    if [[ ! $arg =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then arg="'${arg//\'/\'\\\'\'}'"; fi
    line+="${line:+ }$arg"
  done
  echo "$line"
}
