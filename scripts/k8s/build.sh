#!/usr/bin/env bash
# Builds the Kubernetes pieces Carve is tested against into the cache
# versions.sh names, and prints their bin directory on the last line:
# scripts/k8s/build/ does it (usage there), from the modules committed in
# scripts/k8s/modules/.
#
# The build settings are Carve's own (scripts/goenv.sh), so that packages
# both graphs hold at one version compile once; a caller's GOFLAGS does
# not apply (the binaries' stamp assumes these). GOTOOLCHAIN=local: a
# module asking for a newer Go fails loudly instead of fetching a
# toolchain. The proxy_retry settings go to the tool, which retries alike.
set -euo pipefail
repo=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/../.." && pwd -P)
# shellcheck source=../goenv.sh
GOFLAGS='' source "$repo/scripts/goenv.sh"
export GOTOOLCHAIN=local CARVE_PROXY_NET_ERRORS
cd "$repo"
exec go run ./scripts/k8s/build "$@"
