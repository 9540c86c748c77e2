// Package iolimit puts a volume's IO limits on the pods that use it, with
// cgroup v2's io controller: a line of io.max in the pod's cgroup for the
// device the pod's IO reaches (the LV, or an encrypted volume's dm-crypt
// mapping). The kernel then throttles every process of the pod, all its
// containers together, on that device and no other; IO the pod makes on
// its other volumes is limited by their own lines, or not at all.
//
// Kubelet makes a pod's cgroup before it asks for the pod's volumes, so
// the cgroup is there when NodePublishVolume runs; each pod gets a new
// one, so a line never outlives its pod. Kubelet's two cgroup drivers
// name it apart (see PodDir).
package iolimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"carve.dev/carve/driver/volume"
)

// DefaultRoot is where cgroup v2 is mounted on a node.
const DefaultRoot = "/sys/fs/cgroup"

// ErrNoPodCgroup: the pod's cgroup is not under the root (kubelet runs
// without per-pod cgroups, --cgroups-per-qos=false, or the root is not the
// host's hierarchy).
var ErrNoPodCgroup = errors.New("no cgroup of the pod")

// Cgroups is a cgroup v2 hierarchy: the host's, where kubelet keeps pods.
type Cgroups struct{ Root string }

// uidPattern is a pod UID as Kubernetes makes them: nothing else may
// become part of a path.
var uidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// ValidUID tells a pod UID.
func ValidUID(uid string) bool { return uidPattern.MatchString(uid) }

// PodDir finds the pod's cgroup. Kubelet's cgroupfs driver names it
// pod<UID> under kubepods/ or kubepods/<qos>/ (Guaranteed pods sit right
// under kubepods); its systemd driver kubepods[-<qos>]-pod<UID with
// underscores>.slice under kubepods.slice/[kubepods-<qos>.slice/]. Only
// directories named kubepods* are searched, at most three levels down.
func (c Cgroups) PodDir(uid string) (string, error) {
	if !ValidUID(uid) {
		return "", fmt.Errorf("%w: %q is not a pod UID", volume.ErrInvalidArgument, uid)
	}
	cgroupfs := "pod" + uid
	systemd := "pod" + strings.ReplaceAll(uid, "-", "_") + ".slice"
	dirs := []string{c.Root}
	for depth := 0; depth < 3 && len(dirs) > 0; depth++ {
		var next []string
		for _, d := range dirs {
			entries, err := os.ReadDir(d)
			if err != nil {
				if depth == 0 {
					return "", fmt.Errorf("cgroup root %s: %w", c.Root, err)
				}
				continue // a cgroup gone meanwhile
			}
			for _, e := range entries {
				name := e.Name()
				if !e.IsDir() || !strings.HasPrefix(name, "kubepods") && depth == 0 {
					continue
				}
				if name == cgroupfs || strings.HasPrefix(name, "kubepods") && strings.HasSuffix(name, "-"+systemd) {
					return filepath.Join(d, name), nil
				}
				if strings.HasPrefix(name, "kubepods") || depth == 0 || isQoS(name) {
					next = append(next, filepath.Join(d, name))
				}
			}
		}
		dirs = next
	}
	return "", fmt.Errorf("%w %s under %s", ErrNoPodCgroup, uid, c.Root)
}

// isQoS tells the cgroupfs driver's QoS class directories.
func isQoS(name string) bool { return name == "besteffort" || name == "burstable" }

// Set writes l for the block device rdev into the io.max of cgroup dir:
// no limit at all removes the device's line. A cgroup without io.max has
// the io controller off (its parent's cgroup.subtree_control lacks it).
func Set(dir string, rdev uint64, l volume.IOLimits) error {
	p := filepath.Join(dir, "io.max")
	// No O_CREATE: a cgroup's files are the kernel's; one missing means
	// the controller is off, and a file made in its place would do nothing.
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: the io controller is not enabled for the pod's cgroup: %w", p, err)
	}
	if err != nil {
		return err
	}
	_, err = f.WriteString(Line(rdev, l))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", p, err)
	}
	return nil
}

// Line is io.max's line for rdev: "MAJ:MIN rbps=N wbps=max riops=max
// wiops=max", max for each limit that is 0.
func Line(rdev uint64, l volume.IOLimits) string {
	v := func(n uint64) string {
		if n == 0 {
			return "max"
		}
		return strconv.FormatUint(n, 10)
	}
	return fmt.Sprintf("%d:%d rbps=%s wbps=%s riops=%s wiops=%s", unix.Major(rdev), unix.Minor(rdev),
		v(l.ReadBPS), v(l.WriteBPS), v(l.ReadIOPS), v(l.WriteIOPS))
}

// Read is the limits io.max of cgroup dir holds for rdev (none: zero).
func Read(dir string, rdev uint64) (volume.IOLimits, error) {
	b, err := os.ReadFile(filepath.Join(dir, "io.max"))
	if err != nil {
		return volume.IOLimits{}, err
	}
	return parseIOMax(string(b), rdev)
}

// parseIOMax reads rdev's limits out of io.max's text.
func parseIOMax(text string, rdev uint64) (volume.IOLimits, error) {
	var l volume.IOLimits
	dev := fmt.Sprintf("%d:%d", unix.Major(rdev), unix.Minor(rdev))
	for _, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != dev {
			continue
		}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return l, fmt.Errorf("io.max: %q is not key=value", f)
			}
			n := uint64(0)
			if v != "max" {
				var err error
				if n, err = strconv.ParseUint(v, 10, 64); err != nil {
					return l, fmt.Errorf("io.max: %s: %w", f, err)
				}
			}
			switch k {
			case "rbps":
				l.ReadBPS = n
			case "wbps":
				l.WriteBPS = n
			case "riops":
				l.ReadIOPS = n
			case "wiops":
				l.WriteIOPS = n
			}
		}
	}
	return l, nil
}
