# shellcheck shell=bash
# The Go build settings every build here shares: carve, its tests, the VM
# suites, the e2e, the image's build stage and scripts/k8s/build.sh's
# Kubernetes components. One setting everywhere lets the build cache serve
# a package compiled by one of them to all the others; the dependencies
# Carve shares with Kubernetes (client-go, apimachinery, grpc, ...) are
# most of its compile, and go.mod pins them at the versions of the
# Kubernetes build's module graph (scripts/k8s/build.sh reports any that
# drift). A different cgo setting or flag compiles everything again.
#   CGO_ENABLED=0        carve is static; the VM and image run its binaries
#   -trimpath            what the image's build stage needs, and reproducible
#   -gcflags -dwarf=false  no debug info to generate: binaries are stripped
#                        (-s -w) anyway, and stack traces do not need it
# Sourced; GOFLAGS from the caller's environment wins (make passes its own,
# which is this one).
CARVE_GOFLAGS='-buildvcs=false -trimpath -gcflags=all=-dwarf=false'
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-$CARVE_GOFLAGS}"
# Modules come from the module proxy only: Go's default list ends in
# "direct", which on a module the proxy does not have would fetch it from
# its origin (a version control host) instead. The configured proxy stays.
if command -v go >/dev/null; then
	GOPROXY=$(go env GOPROXY)
	GOPROXY=${GOPROXY%,direct}
	export GOPROXY=${GOPROXY%|direct}
fi
