//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const testNS = "default"

// wait is waitFor that fails the test.
func wait(t *testing.T, what string, timeout time.Duration, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := h.waitFor(what, timeout, cond); err != nil {
		t.Fatal(err)
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := h.kc.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func get(ctx context.Context, name string, obj client.Object) error {
	ns := testNS
	switch obj.(type) {
	case *corev1.PersistentVolume, *storagev1.VolumeAttachment, *corev1.Node:
		ns = ""
	}
	return h.kc.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj)
}

func pvc(name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}

// pod is a busybox pod that mounts claim at /data and waits; the test
// works inside its container (inContainer).
func pod(name, claim string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: busyboxRef, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"sleep", "86400"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			TerminationGracePeriodSeconds: new(int64),
		},
	}
}

// runPod creates a pod on claim and waits until it runs, which with CSI
// means kubelet has staged and published the volume.
func runPod(t *testing.T, name, claim string) *corev1.Pod {
	t.Helper()
	create(t, pod(name, claim))
	return waitRunning(t, name, 5*time.Minute)
}

// waitRunning waits until pod name runs and returns it.
func waitRunning(t *testing.T, name string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var p corev1.Pod
	wait(t, "pod "+name+" running", timeout, func(ctx context.Context) (bool, error) {
		if err := get(ctx, name, &p); err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodRunning, nil
	})
	return &p
}

// deletePod deletes a pod and waits until it is gone.
func deletePod(t *testing.T, name string) {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS}}
	if err := h.kc.Delete(context.Background(), p); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	wait(t, "pod "+name+" gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return gone(get(ctx, name, &corev1.Pod{}))
	})
}

// deleteClaim deletes a PVC and waits until its PV, LogicalVolume and LV
// are gone.
func deleteClaim(t *testing.T, name string) {
	t.Helper()
	pv := startClaimDelete(t, name)
	if pv == "" {
		return
	}
	// The PV's node, while it is there: the LV must be gone from it (and
	// another node may be down, as in TestNodeLostForGood).
	var node string
	var v corev1.PersistentVolume
	if err := get(context.Background(), pv, &v); err == nil {
		node = pinnedNode(&v)
	}
	wait(t, "PV "+pv+" gone", 3*time.Minute, func(ctx context.Context) (bool, error) {
		return gone(get(ctx, pv, &corev1.PersistentVolume{}))
	})
	find := func() (*lv, error) { return lvInfo(pv) }
	if node != "" {
		find = func() (*lv, error) { return lvOn(node, pv) }
	}
	if lv, err := find(); err != nil || lv != nil {
		t.Errorf("LV %s after its PV was deleted: %+v, %v", pv, lv, err)
	}
}

// startClaimDelete deletes a PVC and returns its PV's name ("" unbound).
func startClaimDelete(t *testing.T, name string) string {
	t.Helper()
	var c corev1.PersistentVolumeClaim
	if err := get(context.Background(), name, &c); err != nil {
		t.Fatal(err)
	}
	if err := h.kc.Delete(context.Background(), &c); err != nil {
		t.Fatal(err)
	}
	return c.Spec.VolumeName
}

// waitDetached waits until pv's VolumeAttachment is gone: kubelet has
// unstaged the volume and the attacher has unpublished it (detached).
func waitDetached(t *testing.T, pv, when string) {
	t.Helper()
	wait(t, "PV "+pv+" detached "+when, 3*time.Minute, func(ctx context.Context) (bool, error) {
		va, err := volumeAttachment(ctx, pv)
		return va == nil && err == nil, err
	})
}

func gone(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

func boundClaim(t *testing.T, name string) *corev1.PersistentVolumeClaim {
	t.Helper()
	var c corev1.PersistentVolumeClaim
	wait(t, "PVC "+name+" bound", 3*time.Minute, func(ctx context.Context) (bool, error) {
		if err := get(ctx, name, &c); err != nil {
			return false, err
		}
		return c.Status.Phase == corev1.ClaimBound, nil
	})
	return &c
}

// lv is one LV as lvs reports it in the VM.
type lv struct {
	Name   string `json:"lv_name"`
	Attr   string `json:"lv_attr"`
	Size   string `json:"lv_size"`
	Active string `json:"lv_active"`
}

func (l *lv) bytes() int64 { n, _ := strconv.ParseInt(l.Size, 10, 64); return n }

// lvInfo reports LV name of VG e2e on whichever VM node has it, nil when
// none has: looking on every node also catches an LV made, or left, on a
// node it should not be on.
func lvInfo(name string) (*lv, error) {
	var found *lv
	for _, node := range lvmNodes() {
		l, err := lvOn(node, name)
		if err != nil {
			return nil, err
		}
		if l != nil && found != nil {
			return nil, fmt.Errorf("LV %s is on more than one node", name)
		}
		if l != nil {
			found = l
		}
	}
	return found, nil
}

// lvOn reports LV name of VG e2e on node, nil when it has none.
func lvOn(node, name string) (*lv, error) {
	lvs, err := listLVs(node)
	if err != nil {
		return nil, err
	}
	for i := range lvs {
		if lvs[i].Name == name {
			return &lvs[i], nil
		}
	}
	return nil, nil
}

// listLVs lists VG e2e's LVs on a VM node.
func listLVs(node string) ([]lv, error) {
	v, err := h.vmNamed(node)
	if err != nil {
		return nil, err
	}
	out, err := v.sh("lvs", "--reportformat", "json", "--units", "b", "--nosuffix",
		"-o", "lv_name,lv_attr,lv_size,lv_active", "e2e")
	if err != nil {
		return nil, err
	}
	var rep struct {
		Report []struct {
			LV []lv `json:"lv"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		return nil, fmt.Errorf("lvs: %w: %s", err, out)
	}
	if len(rep.Report) == 0 {
		return nil, nil
	}
	return rep.Report[0].LV, nil
}

// publishPath is where kubelet has the pod's CSI volume mounted, and
// stagingPath where it staged it (kubelet's csi plugin layout).
func publishPath(p *corev1.Pod, pv string) string {
	return fmt.Sprintf("/var/lib/kubelet/pods/%s/volumes/kubernetes.io~csi/%s/mount", p.UID, pv)
}

func stagingPath(volumeHandle string) string {
	sum := sha256.Sum256([]byte(volumeHandle))
	return fmt.Sprintf("/var/lib/kubelet/plugins/kubernetes.io/csi/%s/%s/globalmount", driverName, hex.EncodeToString(sum[:]))
}

// mounted tells whether path is a mount point on a VM node.
func mounted(node, path string) (bool, error) {
	v, err := h.vmNamed(node)
	if err != nil {
		return false, err
	}
	out, err := v.sh("cat", "/proc/self/mountinfo")
	if err != nil {
		return false, err
	}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == path {
			return true, nil
		}
	}
	return false, nil
}

// volumeAttachment finds the VolumeAttachment of pv on node, nil if none.
func volumeAttachment(ctx context.Context, pv string) (*storagev1.VolumeAttachment, error) {
	var list storagev1.VolumeAttachmentList
	if err := h.kc.List(ctx, &list); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if s := list.Items[i].Spec.Source.PersistentVolumeName; s != nil && *s == pv {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

// waitEvent waits for an event about name with reason whose message
// contains text, and logs it.
func waitEvent(t *testing.T, name, reason, text string, timeout time.Duration) {
	t.Helper()
	var seen []string
	defer func() {
		if t.Failed() {
			t.Logf("events about %s seen last: %q", name, seen)
		}
	}()
	wait(t, "a "+reason+" event about "+name+" saying "+text, timeout, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, name)
		seen = evs
		for _, e := range evs {
			if strings.HasPrefix(e, reason+": ") && strings.Contains(e, text) {
				t.Logf("event: %s", e)
				return true, nil
			}
		}
		return false, err
	})
}

// events lists the events about obj's name, as "reason: message".
func events(ctx context.Context, name string) ([]string, error) {
	var list corev1.EventList
	if err := h.kc.List(ctx, &list, client.InNamespace(testNS)); err != nil {
		return nil, err
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason+": "+e.Message)
		}
	}
	return out, nil
}
