package apiserver

import (
	"context"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// RunManager starts mgr (its caches and controllers) for the rest of the
// test, and stops it at the test's end, failing the test if it stopped
// on an error.
func RunManager(t testing.TB, mgr manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}
