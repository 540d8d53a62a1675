#!/usr/bin/env bash
# `make demo`: fluffy changes a real Go project test-first, offline.
# A copy of examples/parseconfig becomes a git repository; the provider is
# provider-replay playing examples/cassettes/parseconfig.jsonl (the scripted
# model turns), so no network and no API key are needed. Everything else is
# real: the kernel (in its L1 container unless FLUFFY_L1=none), every tool
# call judged by the policy and run in an L2 container, `go test` inside the
# sandbox, the merge and the commit.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fluffy="$root/bin/fluffy"
demo=$(mktemp -d /tmp/fluffy-demo.XXXXXX)
export FLUFFY_HOME="${FLUFFY_HOME:-$(mktemp -d /tmp/fh.XXXXXX)}"
cp -r "$root/examples/parseconfig/." "$demo/"
cd "$demo"
git init -q -b main
git -c user.name=demo -c user.email=demo@example.com add -A
git -c user.name=demo -c user.email=demo@example.com commit -q -m "parseconfig: ignores every error"
mkdir -p .fluffy
cp "$root/examples/cassettes/parseconfig.jsonl" .fluffy/demo-cassette.jsonl
"$fluffy" config set --project provider replay >/dev/null
"$fluffy" config set --project providers.replay.cassette "$demo/.fluffy/demo-cassette.jsonl" >/dev/null
printf '\n== project %s (FLUFFY_HOME=%s)\n' "$demo" "$FLUFFY_HOME"
printf '== the model is REPLAYED from examples/cassettes/parseconfig.jsonl (provider-replay): its words\n'
printf '   are scripted; the kernel, the sandboxes, the policy, go test, the merge and the commit are real.\n\n'
set +e
"$fluffy" --yes "add error handling to parseConfig"
rc=$?
set -e
printf '\n== git log\n'
git --no-pager log --stat --format='%h %s' -2
printf '\n== go test on the host\n'
GOFLAGS=-mod=mod go test ./... || true
printf '\n== audit\n'
# The audit log is the kernel's database: stop the kernel, then verify it.
"$fluffy" kernel stop >/dev/null 2>&1 || true
for _ in $(seq 1 50); do
  "$fluffy" audit verify --all 2>/tmp/fluffy-demo-verify.err && break
  grep -q STORE_LOCKED /tmp/fluffy-demo-verify.err || { cat /tmp/fluffy-demo-verify.err; break; }
  sleep 0.2
done
exit $rc
