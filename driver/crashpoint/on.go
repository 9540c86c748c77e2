//go:build crashpoints

package crashpoint

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// point is where to crash: after the Nth command of method's calls.
type point struct {
	method string // the last element of the gRPC method, e.g. CreateVolume
	n      int
}

var (
	armed  = parse(os.Getenv("CARVE_CRASH"))
	mu     sync.Mutex
	active int // calls of armed.method in flight
	count  int // their commands so far
)

// parse reads "Method:N"; anything else disarms the seam (n == 0).
func parse(s string) point {
	method, n, ok := strings.Cut(s, ":")
	k, err := strconv.Atoi(n)
	if !ok || err != nil || k < 1 || method == "" {
		return point{}
	}
	return point{method: method, n: k}
}

// Interceptors track calls of the armed method.
func Interceptors() []grpc.UnaryServerInterceptor {
	if armed.n == 0 {
		return nil
	}
	return []grpc.UnaryServerInterceptor{track}
}

func track(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:] != armed.method {
		return h(ctx, req)
	}
	mu.Lock()
	active++
	mu.Unlock()
	defer func() {
		mu.Lock()
		active--
		mu.Unlock()
	}()
	return h(ctx, req)
}

// Wrap counts the commands of the armed method's calls, after observe, and
// kills the process after the Nth.
func Wrap(observe func(string, []string, time.Duration, error)) func(string, []string, time.Duration, error) {
	return func(name string, args []string, d time.Duration, err error) {
		if observe != nil {
			observe(name, args, d, err)
		}
		mu.Lock()
		hit := false
		if armed.n > 0 && active > 0 {
			count++
			hit = count == armed.n
		}
		mu.Unlock()
		if hit {
			// The test reads this line to know where the process died.
			fmt.Fprintf(os.Stderr, "crashpoint: SIGKILL after command %d of %s: %s %s\n", armed.n, armed.method, name, strings.Join(args, " "))
			klog.Flush()
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			time.Sleep(time.Minute) // the signal lands before this ends
		}
	}
}
