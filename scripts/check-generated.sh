#!/usr/bin/env bash
# Fails when the generated files (the API types' deepcopy code and the CRDs
# with their copies) are not what `make generate` writes from driver/api:
# a change of the types committed without regenerating. It regenerates
# them in place, so the tree is right afterwards either way; the message
# names the files to commit.
# usage: scripts/check-generated.sh   (make check-generated; make test-unit runs it)
set -euo pipefail
cd "$(dirname "$0")/.."

sums() {
	find driver/api -name 'zz_generated.*.go' -print0 |
		cat - <(find deploy/crds deploy/kubernetes/crds deploy/helm/carve/crds -name '*.yaml' -print0) |
		sort -z | xargs -0 sha256sum
}

before=$(sums)
make --no-print-directory generate >/dev/null
after=$(sums)
if [[ $before != "$after" ]]; then
	echo "check-generated: these generated files were stale; make generate has rewritten them, commit them:" >&2
	diff <(echo "$before") <(echo "$after") | sed -n 's/^> [0-9a-f]*  /  /p' >&2
	exit 1
fi
echo "check-generated: deepcopy code and CRDs are as make generate writes them"
