//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// leftoversScript prints, one per line, what a node still holds of pods
// once every pod is deleted: containerd tasks, mounts under kubelet's pod
// and CSI directories, pod network namespaces, containerd's shims and
// processes in a pod's cgroup. $1 is the node's containerd socket. Run with sh on either node.
const leftoversScript = `sock=$1
for id in $(ctr -a "$sock" -n k8s.io tasks ls -q); do echo "container task $id"; done
while read -r _ mnt _; do
	case $mnt in
	/var/lib/kubelet/pods/*|/var/lib/kubelet/plugins/kubernetes.io/*) echo "mount $mnt" ;;
	esac
done </proc/self/mounts
for n in /run/netns/*; do [ -e "$n" ] && echo "network namespace $n"; done
for p in /proc/[0-9]*; do
	c=$(cat "$p/comm" 2>/dev/null) || continue
	case $c in containerd-shim*) echo "process ${p#/proc/} ($c)"; continue ;; esac
	grep -qs kubepods "$p/cgroup" && echo "process ${p#/proc/} ($c) in a pod's cgroup"
done
exit 0`

// udevStrayScript prints, one per line, what lvm2 and udev left behind
// between them on an LVM node: links under /dev/e2e and /dev/mapper that
// lead nowhere (a node made and never removed, by lvm2 in Carve's
// container or by the node's udevd), and udev cookies (SysV semaphores
// that lvm2 made to wait on udev and no one completed) in the node's IPC
// namespace and in those of the processes running there, Carve's
// container's included. Nothing it lists is ever right, busy or idle.
const udevStrayScript = `for l in /dev/e2e/* /dev/mapper/*; do
	[ -L "$l" ] && [ ! -e "$l" ] && echo "dangling link $l"
done
seen=
for p in 1 /proc/[0-9]*; do
	ns=$(readlink "/proc/${p#/proc/}/ns/ipc" 2>/dev/null) || continue
	case " $seen " in *" $ns "*) continue ;; esac
	seen="$seen $ns"
	nsenter -t "${p#/proc/}" -i dmsetup udevcookies 2>/dev/null | awk -v ns="$ns" 'NR > 1 && NF { print "udev cookie " $1 " in " ns }'
done
exit 0`

// lvmLeftoversScript prints what an LVM node still holds of volumes once
// every claim is gone: device-mapper devices of VG e2e other than its
// thin pool's, and udevStrayScript's findings.
const lvmLeftoversScript = `dmsetup ls 2>/dev/null | while read -r name _; do
	case $name in e2e-thinpool|e2e-thinpool_t*|e2e-thinpool-tpool) ;; e2e-*) echo "device-mapper device $name" ;; esac
done
` + udevStrayScript

// checkNothingLeft runs at teardown, after uninstall: with Carve, the
// snapshot add-on and every test's pods deleted, neither node may hold a
// container, a pod's mount, a pod network namespace or a pod's process,
// and the VM's volume group no LV but the thin pool. kubelet finishes
// tearing a pod down after the API has let it go, so this waits a little
// for the nodes to settle before it reports what is left.
func (x *harness) checkNothingLeft() error {
	var left []string
	err := x.waitFor("nothing of any pod left on any node", time.Minute, func(context.Context) (bool, error) {
		var err error
		left, err = x.leftovers()
		return len(left) == 0, err
	})
	if err != nil && len(left) > 0 {
		return fmt.Errorf("%w:\n  %s", err, strings.Join(left, "\n  "))
	}
	return err
}

func (x *harness) leftovers() ([]string, error) {
	var left []string
	for _, node := range lvmNodes() {
		v := x.vmOf(node)
		if v == nil {
			continue
		}
		out, err := v.sh("sh", "-c", leftoversScript, "sh", "/run/carve-containerd/containerd.sock")
		if err != nil {
			return nil, err
		}
		for _, l := range nonEmptyLines(out) {
			left = append(left, node+": "+l)
		}
		out, err = v.sh("sh", "-c", lvmLeftoversScript)
		if err != nil {
			return nil, err
		}
		for _, l := range nonEmptyLines(out) {
			left = append(left, node+": "+l)
		}
		lvs, err := listLVs(node)
		if err != nil {
			return nil, err
		}
		for _, l := range lvs {
			if l.Name != "thinpool" {
				left = append(left, node+": LV "+l.Name)
			}
		}
	}
	sock := filepath.Join(x.work, "host", "containerd-state", "containerd.sock")
	if fileExists(sock) {
		out, err := exec.Command("sh", "-c", leftoversScript, "sh", sock).Output()
		if err != nil {
			return nil, fmt.Errorf("host node: %w", errText(err))
		}
		for _, l := range nonEmptyLines(out) {
			left = append(left, "host node: "+l)
		}
	}
	return left, nil
}

func nonEmptyLines[S ~string | ~[]byte](s S) []string {
	var lines []string
	for _, l := range strings.Split(string(s), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}
