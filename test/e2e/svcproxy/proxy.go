// Package svcproxy forwards TCP connections from one address to another:
// the e2e cluster's stand-in for kube-proxy, for the one Service its pods
// use. The cluster runs no kube-proxy, so the harness listens on the
// `kubernetes` Service's ClusterIP in each node (the host node's network
// namespace, the VM) and forwards to the apiserver; in-cluster clients
// (carve, the sidecars, snapshot-controller) then reach the API the way
// they do in any cluster, through KUBERNETES_SERVICE_HOST and _PORT.
package svcproxy

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"sync"
	"time"
)

// Serve accepts connections on l and copies each, both ways, to a new
// connection to target, until ctx ends. It returns once every connection
// it opened is closed.
func Serve(ctx context.Context, l net.Listener, target string) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			forward(ctx, c, target)
		}()
	}
}

// forward joins one accepted connection to a new one to target.
func forward(ctx context.Context, c net.Conn, target string) {
	defer func() { _ = c.Close() }()
	d := net.Dialer{Timeout: 10 * time.Second}
	t, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		log.Printf("svcproxy: %s -> %s: %v", c.RemoteAddr(), target, err)
		return
	}
	defer func() { _ = t.Close() }()
	// Closing both ends when ctx ends or one side finishes unblocks the
	// other copy.
	stop := context.AfterFunc(ctx, func() { _ = c.Close(); _ = t.Close() })
	defer stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(t, c)
	go pipe(c, t)
	<-done
	<-done
}
