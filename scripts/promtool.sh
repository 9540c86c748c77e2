#!/usr/bin/env bash
# Builds promtool, Prometheus' rule checker, which deploy/'s TestAlertRules
# runs on deploy/monitoring (promtool check rules, promtool test rules),
# from the Go module proxy, and prints its path on the last line. make
# test-unit hands that path to the tests (CARVE_PROMTOOL).
#
# usage: scripts/promtool.sh
#
# Output: _output/tools/promtool-$PROMTOOL_VERSION/promtool, reused while
# it is there. `go install module@version` builds it in Prometheus' own
# module graph: none of it enters Carve's go.mod. remove_all_sd leaves out
# the service discoveries of the clouds (AWS, Azure, GCE...), most of
# promtool's dependencies, which only `promtool check config` would use.
set -euo pipefail
here=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)
repo=$(dirname -- "$here")

# Prometheus v3's Go module version (its releases are v0.3xx.y).
PROMTOOL_VERSION=v0.316.0

# Carve's build settings (shared build cache), and a module asking for a
# newer Go fails instead of fetching a toolchain.
# shellcheck source=goenv.sh
GOFLAGS='' source "$here/goenv.sh"
export GOTOOLCHAIN=local

dir=$repo/_output/tools/promtool-$PROMTOOL_VERSION
if [[ ! -x $dir/promtool ]]; then
  s=$SECONDS
  mkdir -p "$repo/_output/tools"
  # Built into a scratch dir and moved: a killed build leaves no
  # half-written binary to be taken for a built one.
  tmp=$(mktemp -d "$repo/_output/tools/.promtool.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Prometheus' own packages without optimisation or inlining (-N -l):
  # the compiler is about twice as fast on them, and promtool only checks
  # and evaluates a few rules (scripts/k8s/build.sh does the same).
  GOBIN=$tmp proxy_retry nice -n "${CARVE_BUILD_NICE:-10}" go install -tags remove_all_sd -ldflags='-s -w' \
    -gcflags='github.com/prometheus/prometheus/...=-N -l -dwarf=false' \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMTOOL_VERSION" 2> >(grep -v '^go: downloading' >&2)
  mkdir -p "$dir"
  mv -f "$tmp/promtool" "$dir/promtool"
  printf 'promtool %s built in %ds\n' "$PROMTOOL_VERSION" $((SECONDS - s)) >&2
fi
echo "$dir/promtool"
