// Command fake-cri serves k8s.io/cri-client's fake CRI runtime on a unix
// socket until SIGTERM or SIGINT. Pods "run" without any container.
package main

import (
	"flag"
	"log"
	"os"
	"os/signal"
	"syscall"

	fakeremote "k8s.io/cri-client/pkg/fake"
)

func main() {
	endpoint := flag.String("endpoint", "unix:///run/carve-fake-cri/cri.sock", "CRI endpoint to serve")
	flag.Parse()
	r := fakeremote.NewFakeRemoteRuntime()
	r.ImageService.SetFakeImageSize(1 << 20)
	if err := r.Start(*endpoint); err != nil {
		log.Fatal(err)
	}
	log.Printf("fake CRI runtime serving on %s", *endpoint)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	log.Printf("stopping on %v", <-sig)
	r.Stop()
}
