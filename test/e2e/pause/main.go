// Command pause is the e2e cluster's pod sandbox image (containerd's
// sandbox_image): it holds the pod's namespaces and waits to be stopped.
// As PID 1 of the sandbox it also reaps the zombies of processes that
// share its PID namespace, as Kubernetes' own pause does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
