// Package apiserver starts a real etcd and kube-apiserver (controller-
// runtime's envtest) with Carve's CRDs installed, for the tests of the node
// agent and the controller backend: unlike a fake client, a real API server
// sets generations, runs finalizers and deletion, serves the status
// subresource and watches, which the backend and the agent rely on. Its
// own test (nodepolicy_test.go) runs deploy/'s admission policy there,
// with service-account tokens the server issues and authenticates.
//
// The binaries are the ones scripts/k8s/build.sh builds from the Go module
// proxy, the same the e2e cluster runs: from KUBEBUILDER_ASSETS when set
// (make test-unit sets it), else from build.sh's cache.
package apiserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Server is a running API server.
type Server struct {
	env *envtest.Environment
	// Config reaches it as an administrator.
	Config *rest.Config
}

// Start runs etcd and kube-apiserver with the CRDs of deploy/crds.
func Start() (*Server, error) {
	repo, err := repoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := binDir(repo)
	if err != nil {
		return nil, err
	}
	srv, err := startOnce(repo, bin)
	if err != nil {
		// envtest picks etcd's and kube-apiserver's ports by binding
		// and closing them: another process (the packages run side by
		// side, and make test's other lanes) can take one before the
		// server binds it. That is the machine, not the code under test:
		// one more start, on fresh ports, with the first failure said.
		fmt.Fprintf(os.Stderr, "apiserver: first start failed, trying once more: %v\n", err)
		srv, err = startOnce(repo, bin)
	}
	return srv, err
}

// startOnce starts etcd and kube-apiserver with the CRDs installed.
func startOnce(repo, bin string) (*Server, error) {
	env := &envtest.Environment{
		BinaryAssetsDirectory: bin,
		CRDDirectoryPaths:     []string{filepath.Join(repo, "deploy", "crds")},
		ErrorIfCRDPathMissing: true,
		// envtest gives each process 20 s to become ready; make test
		// starts this beside two VMs of the e2e and one of the VM suites
		// on two cores, where kube-apiserver once took longer (5 tries, all
		// failed). A hang guard, not a speed check.
		ControlPlaneStartTimeout: 3 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // what did start, before a second try
		return nil, fmt.Errorf("start etcd and kube-apiserver from %s: %w", bin, err)
	}
	return &Server{env: env, Config: cfg}, nil
}

// Stop ends both processes.
func (s *Server) Stop() error { return s.env.Stop() }

// binDir is where etcd and kube-apiserver are.
func binDir(repo string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		// The cache directory build.sh uses, as versions.sh derives it.
		out, err := exec.Command("bash", "-c", `source "$1" && echo "$K8S_BIN"`, "-",
			filepath.Join(repo, "scripts", "k8s", "versions.sh")).Output()
		if err != nil {
			return "", fmt.Errorf("read the Kubernetes binaries' directory from scripts/k8s/versions.sh: %w", err)
		}
		dir = strings.TrimSpace(string(out))
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return "", fmt.Errorf("%s not built in %s: run scripts/k8s/build.sh (make test-unit does): %w", b, dir, err)
		}
	}
	return dir, nil
}

// repoRoot is the module's root: the first directory above the working
// directory (a test's is its package's) that holds go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// RunTests is a package's TestMain: it starts a server into *s, runs the
// tests, stops the server and returns the exit code.
func RunTests(m *testing.M, s **Server) int {
	srv, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*s = srv
	code := m.Run()
	if err := srv.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop the API server:", err)
	}
	return code
}
