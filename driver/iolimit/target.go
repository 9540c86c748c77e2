package iolimit

import (
	"path/filepath"
	"strings"
)

// PodOfTarget is the UID of the pod a target path is kubelet's for, root
// being kubelet's root directory:
//
//	ROOT/pods/UID/volumes/kubernetes.io~csi/PV/mount              (a filesystem)
//	ROOT/plugins/kubernetes.io/csi/volumeDevices/publish/PV/UID   (a raw block volume)
//
// Any other path (csi-sanity's, a hand-made one) has no pod.
func PodOfTarget(root, target string) (string, bool) {
	rel, err := filepath.Rel(root, target)
	if err != nil || strings.HasPrefix(rel, "..") {
		return "", false
	}
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) == 6 && parts[0] == "pods" && parts[2] == "volumes" && parts[3] == "kubernetes.io~csi" && parts[5] == "mount":
		return parts[1], ValidUID(parts[1])
	case len(parts) == 7 && strings.Join(parts[:5], "/") == "plugins/kubernetes.io/csi/volumeDevices/publish":
		return parts[6], ValidUID(parts[6])
	}
	return "", false
}
