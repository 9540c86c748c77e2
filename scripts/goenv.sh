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

# proxy_retry CMD...: runs CMD (a go command that may fetch modules), and
# runs it again, up to CARVE_PROXY_TRIES times in all (3; waiting 15 s, then
# 30 s: CARVE_PROXY_WAIT), while it fails
# with an error of the network to the module proxy: a TLS handshake or dial
# that timed out, a reset connection, a gateway's 502/503/504. Go itself
# does not retry those, and one of them once failed a whole CI run at its
# 40th minute. Any other failure (a compile error, a missing version) is
# returned at once. CMD's output is held until it ends, so that a failed
# try's partial stdout never reaches a reader such as jq; stderr is then
# replayed.
proxy_retry() {
	local tries=${CARVE_PROXY_TRIES:-3} wait=${CARVE_PROXY_WAIT:-15} try=1 rc out err
	out=$(mktemp) err=$(mktemp)
	while :; do
		rc=0
		"$@" >"$out" 2>"$err" || rc=$?
		if ((rc == 0 || try >= tries)) || ! grep -qE "$CARVE_PROXY_NET_ERRORS" "$err"; then
			break
		fi
		echo "proxy_retry: try $try of $tries failed on the network, again in $((try * wait))s: $(grep -m1 -E "$CARVE_PROXY_NET_ERRORS" "$err")" >&2
		sleep $((try * wait))
		try=$((try + 1))
	done
	cat "$out"
	cat "$err" >&2
	rm -f "$out" "$err"
	return "$rc"
}
CARVE_PROXY_NET_ERRORS='TLS handshake timeout|i/o timeout|connection reset by peer|connection refused|Client\.Timeout exceeded|unexpected EOF|temporary failure in name resolution|server misbehaving|502 Bad Gateway|503 Service Unavailable|504 Gateway Timeout'
