package agent

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/transfer"
	"carve.dev/carve/driver/volume"
	"carve.dev/carve/test/testpki"
)

// addressBook answers a Get of any NodeStorage with addr as its transfer
// address.
type addressBook struct {
	client.Reader
	addr string
}

func (b addressBook) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	ns := obj.(*v1alpha1.NodeStorage)
	ns.Name, ns.Status.TransferAddress = key.Name, b.addr
	return nil
}

// nodeCreds are node's transfer credentials from a test CA.
func nodeCreds(t *testing.T, node string) transfer.Credentials {
	f := testpki.New(t, "ca").Node(t, node)
	creds, err := transfer.LoadCredentials(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// TestTransferReceiverGivesUp: a snapshot's node that refuses every
// connection (or publishes no address) is tried again for GiveUp, each
// failure retryable and saying how long it has been tried; then the
// receive gives up with transfer.ErrGaveUp, RESOURCE_EXHAUSTED, and the
// next try of the volume starts a new wait. A receive that had part of
// the bytes in (from > 0) never gives up.
func TestTransferReceiverGivesUp(t *testing.T) {
	src := volume.ID{Node: "node-a", VG: "vg0", LV: "snap-1"}
	for name, addr := range map[string]string{"connection refused": closedPort(t), "no address": ""} {
		t.Run(name, func(t *testing.T) {
			clock := time.Unix(0, 0)
			r := &TransferReceiver{Client: &transfer.Client{Keyring: transfer.NewKeyring(nodeCreds(t, "node-b"))},
				Reader: addressBook{addr: addr}, GiveUp: time.Minute, now: func() time.Time { return clock }}
			try := func(from int64) error {
				return r.Receive(context.Background(), src, volume.ID{}, "lv-b", nil, 1<<20, from, nil)
			}
			for _, step := range []time.Duration{0, 30 * time.Second, 29 * time.Second} {
				clock = clock.Add(step)
				err := try(0)
				if !errors.Is(err, transfer.ErrUnreachable) || errors.Is(err, transfer.ErrGaveUp) {
					t.Fatalf("after %s: %v, want unreachable, not given up", clock.Sub(time.Unix(0, 0)), err)
				}
			}
			if err := try(64 << 20); errors.Is(err, transfer.ErrGaveUp) || !errors.Is(err, transfer.ErrUnreachable) {
				t.Fatalf("a receive with bytes in: %v, want unreachable, not given up", err)
			}
			// That try dropped the clock: a minute more from the next.
			clock = clock.Add(time.Hour)
			if err := try(0); errors.Is(err, transfer.ErrGaveUp) {
				t.Fatalf("the first try after a partial receive gave up: %v", err)
			}
			clock = clock.Add(time.Minute)
			err := try(0)
			if !errors.Is(err, transfer.ErrGaveUp) || volume.CodeOf(err) != codes.ResourceExhausted {
				t.Fatalf("after a minute: %v (%s), want given up, RESOURCE_EXHAUSTED", err, volume.CodeOf(err))
			}
			if err := try(0); errors.Is(err, transfer.ErrGaveUp) {
				t.Fatalf("the try after giving up gave up at once: %v", err)
			}
		})
	}
}
