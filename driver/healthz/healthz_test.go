package healthz

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type probe struct{ err error }

func (p probe) Probe(context.Context) error { return p.err }

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		err      error
		code     int
		contains string
	}{
		{nil, http.StatusOK, "ok"},
		{errors.New("volume group vg0: not found"), http.StatusServiceUnavailable, "vg0: not found"},
	} {
		srv := httptest.NewServer(Handler(probe{tc.err}))
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		srv.Close()
		if resp.StatusCode != tc.code || !strings.Contains(string(body), tc.contains) {
			t.Errorf("probe error %v: %d %q, want %d containing %q", tc.err, resp.StatusCode, body, tc.code, tc.contains)
		}
	}
}
