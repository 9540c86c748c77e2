// Command carve is the Carve CSI driver, one binary for every role:
//   - `carve standalone` serves CSI Identity, Controller and Node for this
//     node's volume groups straight onto LVM (no cluster needed);
//   - `carve controller` (cluster mode) serves CSI Identity and Controller
//     by writing Carve's resources (driver/backend);
//   - `carve node` (cluster mode) serves CSI Identity and Node to kubelet
//     and runs the node agent that carries the resources out on LVM
//     (driver/agent);
//   - `carve version` and `carve help` print the version and the usage.
//
// This package only wires: flags, the layers of driver/, signals.
package main

import (
	"fmt"
	"os"

	"k8s.io/klog/v2"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `usage: carve <command> [flags]

commands:
  standalone   serve CSI Identity, Controller and Node on this node's LVM
  controller   cluster mode: serve CSI Identity and Controller through Carve's resources
  node         cluster mode: serve CSI Identity and Node to kubelet, and run the node agent
  version      print the version

Run "carve <command> -h" for the flags of a command.
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "standalone":
		err = runStandalone(os.Args[2:])
	case "controller":
		err = runController(os.Args[2:])
	case "node":
		err = runNode(os.Args[2:])
	case "version", "--version", "-version":
		fmt.Println(version)
	case "help", "-h", "--help":
		fmt.Print(usage)
	default:
		fmt.Fprintf(os.Stderr, "carve: unknown command %q\n\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		klog.ErrorS(err, "carve failed")
		klog.Flush()
		os.Exit(1)
	}
}
