// Command vmexec runs inside the e2e test VM and lets the host-side test
// drive the node: run a command and get its output, start and stop
// long-running processes (carve node), and shut the VM's job down.
//
// It listens on the guest's network, which only the host's loopback reaches
// (scripts/vm/run.sh --expose: QEMU hostfwd, restrict=on). It is a test
// harness for a throw-away VM, not something to run on a real node.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"carve.dev/carve/test/e2e/svcproxy"
)

// Exec is the body of POST /exec.
type Exec struct {
	Argv    []string `json:"argv"`
	Env     []string `json:"env,omitempty"`
	Timeout int      `json:"timeoutSeconds,omitempty"`
}

// Result answers POST /exec.
type Result struct {
	Code   int    `json:"code"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// Start is the body of POST /start; Name is also the log file's name.
type Start struct {
	Name string   `json:"name"`
	Argv []string `json:"argv"`
	Env  []string `json:"env,omitempty"`
}

type server struct {
	logDir string
	mu     sync.Mutex
	procs  map[string]*exec.Cmd
	done   map[string]chan struct{}
	quit   chan struct{}
}

func main() {
	addr := flag.String("listen", ":7070", "address to serve on")
	logDir := flag.String("log-dir", "/tmp", "where started processes log")
	proxy := flag.String("proxy", "", "LISTEN=TARGET: forward TCP connections from LISTEN to TARGET "+
		"(the kubernetes Service's ClusterIP to the apiserver: the cluster has no kube-proxy)")
	flag.Parse()
	if *proxy != "" {
		if err := serveProxy(*proxy); err != nil {
			log.Fatal(err)
		}
	}
	s := &server{logDir: *logDir, procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}, quit: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /exec", s.exec)
	mux.HandleFunc("POST /start", s.start)
	mux.HandleFunc("POST /stop/{name}", s.stop)
	mux.HandleFunc("POST /shutdown", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		close(s.quit)
	})
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-s.quit
		s.stopAll()
		_ = srv.Shutdown(context.Background())
	}()
	log.Printf("vmexec serving on %s", *addr)
	if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}

func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	var req Exec
	if !decode(w, r, &req) {
		return
	}
	if len(req.Argv) == 0 {
		http.Error(w, "empty argv", http.StatusBadRequest)
		return
	}
	timeout := time.Duration(req.Timeout) * time.Second
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	res := Result{}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		res.Code = ee.ExitCode()
	}
	res.Stdout, res.Stderr = out.String(), errb.String()
	if ctx.Err() == context.DeadlineExceeded {
		// Killed at the deadline: the exit code (-1) alone does not say so.
		res.Stderr += fmt.Sprintf("\n(vmexec: killed at its timeout of %s)", timeout)
	}
	_ = json.NewEncoder(w).Encode(res)
}

func (s *server) start(w http.ResponseWriter, r *http.Request) {
	var req Start
	if !decode(w, r, &req) {
		return
	}
	if req.Name == "" || filepath.Base(req.Name) != req.Name || len(req.Argv) == 0 {
		http.Error(w, "need a plain name and an argv", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.procs[req.Name]; ok {
		http.Error(w, req.Name+" is already running", http.StatusConflict)
		return
	}
	f, err := os.OpenFile(filepath.Join(s.logDir, req.Name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = fmt.Fprintf(f, "=== %s start: %q\n", time.Now().Format(time.DateTime), req.Argv)
	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	done := make(chan struct{})
	s.procs[req.Name], s.done[req.Name] = cmd, done
	go func() {
		err := cmd.Wait()
		_, _ = fmt.Fprintf(f, "=== %s exit: %v\n", time.Now().Format(time.DateTime), err)
		_ = f.Close()
		s.mu.Lock()
		delete(s.procs, req.Name)
		delete(s.done, req.Name)
		s.mu.Unlock()
		close(done)
	}()
	w.WriteHeader(http.StatusNoContent)
}

// stop sends SIGTERM (or SIGKILL with ?kill=1, to simulate a crash) and
// waits for the process to exit.
func (s *server) stop(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	cmd, done := s.procs[name], s.done[name]
	s.mu.Unlock()
	if cmd == nil {
		http.Error(w, name+" is not running", http.StatusNotFound)
		return
	}
	sig := syscall.SIGTERM
	if r.URL.Query().Get("kill") == "1" {
		sig = syscall.SIGKILL
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *server) stopAll() {
	s.mu.Lock()
	var dones []chan struct{}
	for _, c := range s.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range s.done {
		dones = append(dones, d)
	}
	s.mu.Unlock()
	for _, d := range dones {
		select {
		case <-d:
		case <-time.After(20 * time.Second):
		}
	}
}

// serveProxy listens on LISTEN of "LISTEN=TARGET" and forwards in the
// background for the VM's life.
func serveProxy(spec string) error {
	listen, target, ok := strings.Cut(spec, "=")
	if !ok || listen == "" || target == "" {
		return fmt.Errorf("--proxy %q: want LISTEN=TARGET", spec)
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("--proxy: %w", err)
	}
	log.Printf("forwarding %s to %s", listen, target)
	go func() {
		if err := svcproxy.Serve(context.Background(), l, target); err != nil {
			log.Printf("proxy %s: %v", listen, err)
		}
	}()
	return nil
}
