// Package healthz serves the liveness endpoint that livenessprobe would
// serve elsewhere (that sidecar is not available to this project): GET
// /healthz answers 200 when the driver can do its work, 503 with the reason
// when not. Kubernetes probes it directly. A check that reads disks runs
// in the background (Background), so that a busy disk does not fail it.
package healthz

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"
)

// Prober reports whether the driver can work now.
type Prober interface {
	Probe(ctx context.Context) error
}

// timeout bounds one probe: a hung lvm command must fail the probe, not
// hang it.
const timeout = 10 * time.Second

// Handler serves /healthz from p.
func Handler(p Prober) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := p.Probe(ctx); err != nil {
			klog.ErrorS(err, "Health probe failed")
			http.Error(w, fmt.Sprintf("unhealthy: %v", err), http.StatusServiceUnavailable)
			return
		}
		_, _ = fmt.Fprintln(w, "ok")
	})
	return mux
}
