//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/test/soakmodel"
)

// The soak's operations: each makes its request through the Kubernetes
// API, as a user would, and pushes what it waits for. Nothing here waits:
// the loop polls.

// soakSizes are the sizes claims ask for: rows of two 4 MiB extents (so
// striped volumes are exact too), above the host node's 64 MiB VG (its
// capacity keeps them off it) and ext4's own needs.
var soakSizes = []int64{128 * mi, 160 * mi, 192 * mi, 256 * mi}

// soakGrowth is what an expansion or a larger restore adds.
const soakGrowth = 64 * mi

// createClaim makes a claim of class with its first writer, pinned to
// node: the claim waits for its first consumer, so its volume is carved
// there.
func (s *clusterSoak) createClaim(class *soakmodel.Layout, node string) {
	c := &soakClaim{Volume: soakmodel.Volume{Name: s.model.Next("soak"), Layout: class, Node: node, Size: pick(s, soakSizes), Writes: soakmodel.Writes{}}}
	create(s.t, soakLabelled(pvc(c.Name, class.Name, quantity(c.Size))))
	s.model.Add(c)
	s.startPodAs(c, "create "+class.Name, nil)
}

func (s *clusterSoak) startPod(c *soakClaim) { s.startPodAs(c, "start pod", nil) }

// startPodAs starts a writer pod on c, pinned to c's node: kubelet has
// carve node stage and publish the volume (and, for a new claim,
// csi-provisioner and the attacher have it made and attached first).
// Once it runs, every write acknowledged on the volume must read back.
// It returns the operation pushed.
func (s *clusterSoak) startPodAs(c *soakClaim, kind string, after func()) *soakOp {
	c.Busy = true
	c.pods++
	name := fmt.Sprintf("%s-%d", c.Name, c.pods)
	create(s.t, writerPod(name, c.Name, c.Node))
	var running *corev1.Pod
	op := &soakOp{kind: kind, what: fmt.Sprintf("%s: claim %s (%s, %d MiB) on %s, writer pod %s", kind, c.Name, c.Layout.Name, c.Size/mi, c.Node, name),
		about: []string{c.Name, name, c.LV},
		reached: func(ctx context.Context) (bool, error) {
			var p corev1.Pod
			if err := get(ctx, name, &p); err != nil {
				return false, err
			}
			if p.Status.Phase != corev1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return false, fmt.Errorf("pod %s: %s", name, podSummary(&p))
			}
			running = &p
			return true, nil
		},
		done: func() {
			c.pod, c.Attached = running, true
			s.bind(c)
			s.verify(c, "in its new pod")
			s.checkFilesystem(c)
			c.Busy = false
			if after != nil {
				after()
			}
		}}
	s.push(op)
	return op
}

// stopPod reads the volume, then deletes its pod: kubelet has it
// unpublished and unstaged, the attacher detaches it (the LV deactivated).
func (s *clusterSoak) stopPod(c *soakClaim) {
	c.Busy = true
	s.verify(c, "before its pod is deleted")
	p := c.pod
	if err := h.kc.Delete(context.Background(), p); err != nil {
		s.t.Fatal(err)
	}
	s.push(&soakOp{kind: "delete pod", what: fmt.Sprintf("delete pod %s of claim %s", p.Name, c.Name), about: []string{p.Name, c.LV},
		reached: func(ctx context.Context) (bool, error) {
			if ok, err := gone(get(ctx, p.Name, &corev1.Pod{})); !ok || err != nil {
				return false, err
			}
			va, err := volumeAttachment(ctx, c.LV)
			return va == nil && err == nil, err
		},
		done: func() {
			c.pod, c.Attached = nil, false
			s.checkDetached(c, p)
			c.Busy = false
		}})
}

// deleteClaim deletes c (and its pod, if it has one: the claim goes once
// the pod has): csi-provisioner has carve delete the volume.
func (s *clusterSoak) deleteClaim(c *soakClaim) {
	c.Busy = true
	ctx := context.Background()
	if c.pod != nil {
		if err := h.kc.Delete(ctx, c.pod); client.IgnoreNotFound(err) != nil {
			s.t.Fatal(err)
		}
	}
	claim := &corev1.PersistentVolumeClaim{}
	claim.Name, claim.Namespace = c.Name, testNS
	if err := h.kc.Delete(ctx, claim); err != nil {
		s.t.Fatal(err)
	}
	s.push(&soakOp{kind: "delete claim", what: fmt.Sprintf("delete claim %s (%s, PV %s)", c.Name, c.Layout.Name, c.LV), about: []string{c.Name, c.LV},
		reached: func(ctx context.Context) (bool, error) {
			return allGone(ctx, named{c.Name, &corev1.PersistentVolumeClaim{}}, named{c.LV, &corev1.PersistentVolume{}},
				named{c.LV, &v1alpha1.LogicalVolume{}})
		},
		done: func() {
			s.checkLVGone(c.LV, "of deleted claim "+c.Name)
			s.model.Remove(c)
		}})
}

// snapshot takes a VolumeSnapshot of c; it must hold every write
// acknowledged before it was asked for, read just before.
func (s *clusterSoak) snapshot(c *soakClaim) {
	c.Busy = true
	if c.pod != nil {
		s.verify(c, "before its snapshot")
	}
	sn := soakmodel.NewSnapshot(s.model.Next("soak-snap"), &c.Volume)
	sn.Size, sn.Busy = c.Layout.LVSize(c.Size, s.base[c.Node].extent), true
	vs := volumeSnapshot(sn.Name, c.Name)
	vs.SetLabels(map[string]string{soakLabel: "true"})
	if err := h.kc.Create(context.Background(), vs); err != nil {
		s.t.Fatal(err)
	}
	s.model.AddSnapshot(sn)
	s.push(&soakOp{kind: "snapshot " + c.Layout.Name, what: fmt.Sprintf("snapshot %s of claim %s (%s, %d writes acknowledged)", sn.Name, c.Name, c.Layout.Name, sn.Writes.Count()),
		about: []string{sn.Name, c.Name},
		reached: func(ctx context.Context) (bool, error) {
			if err := h.kc.Get(ctx, soakKey(sn.Name, vs), vs); err != nil {
				return false, err
			}
			ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
			return ready, nil
		},
		done: func() {
			s.readySnapshot(sn, vs)
			sn.Busy, c.Busy = false, false
		}})
}

// restore makes a claim from a snapshot, as large or larger, and starts a
// writer on it pinned to node: the snapshot's, or the other VM node,
// whose carve node then receives the snapshot's data from the snapshot's
// over mutual TLS before the claim is bound. Either way the claim must
// hold the snapshot's acknowledged writes.
func (s *clusterSoak) restore(sn *soakmodel.Snapshot, node string) {
	size := sn.Size
	if s.rng.IntN(2) == 0 {
		size += soakGrowth
	}
	sn.Restores++
	c := &soakClaim{Volume: sn.RestoreOn(s.model.Next("soak"), sn.Layout, size, node)}
	create(s.t, soakLabelled(restoreClaim(c.Name, sn.Layout.Name, quantity(size), sn.Name)))
	s.model.Add(c)
	kind := "restore " + sn.Layout.Name
	if node != sn.Node {
		kind += " across nodes"
	}
	op := s.startPodAs(c, kind, func() { sn.Restores-- })
	op.across = node != sn.Node
	op.about = append(op.about, sn.Name)
}

// expand grows c's claim while its pod runs: csi-resizer has carve grow
// the LV, kubelet has carve node grow the filesystem, online.
func (s *clusterSoak) expand(c *soakClaim) {
	c.Busy = true
	want := c.Size + soakGrowth
	var claim corev1.PersistentVolumeClaim
	if err := get(context.Background(), c.Name, &claim); err != nil {
		s.t.Fatal(err)
	}
	patch := client.MergeFrom(claim.DeepCopy())
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = *resource.NewQuantity(want, resource.BinarySI)
	if err := h.kc.Patch(context.Background(), &claim, patch); err != nil {
		s.t.Fatal(err)
	}
	s.push(&soakOp{kind: "expand " + c.Layout.Name, what: fmt.Sprintf("expand claim %s (%s) %d -> %d MiB, online", c.Name, c.Layout.Name, c.Size/mi, want/mi),
		about: []string{c.Name, c.LV},
		reached: func(ctx context.Context) (bool, error) {
			var now corev1.PersistentVolumeClaim
			if err := get(ctx, c.Name, &now); err != nil {
				return false, err
			}
			have := now.Status.Capacity[corev1.ResourceStorage]
			for _, cond := range now.Status.Conditions {
				if cond.Type == corev1.PersistentVolumeClaimResizing || cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending {
					return false, fmt.Errorf("capacity %s, condition %s: %s", have.String(), cond.Type, cond.Message)
				}
			}
			return have.Value() >= want, fmt.Errorf("capacity %s", have.String())
		},
		done: func() {
			c.Size = want
			s.checkFilesystem(c)
			c.Busy = false
		}})
}

// deleteSnapshot deletes a VolumeSnapshot: its content, Carve's
// LogicalVolumeSnapshot and its LV go.
func (s *clusterSoak) deleteSnapshot(sn *soakmodel.Snapshot) {
	sn.Busy = true
	vs := volumeSnapshot(sn.Name, "")
	if err := h.kc.Delete(context.Background(), vs); err != nil {
		s.t.Fatal(err)
	}
	s.push(&soakOp{kind: "delete snapshot", what: fmt.Sprintf("delete snapshot %s of %s (LV %s)", sn.Name, sn.Source, sn.LV),
		about: []string{sn.Name, sn.ID, sn.LV},
		reached: func(ctx context.Context) (bool, error) {
			return allGone(ctx, named{sn.Name, volumeSnapshot(sn.Name, "")}, named{sn.ID, volumeSnapshotContent()},
				named{sn.LV, &v1alpha1.LogicalVolumeSnapshot{}})
		},
		done: func() {
			s.checkLVGone(sn.LV, "of deleted snapshot "+sn.Name)
			s.model.RemoveSnapshot(sn)
		}})
}

// soakWriterScript is the writer container's command (sh -c). It stops
// after soakWriterFiles files, so that a long soak does not fill its
// volumes, and exits non-zero on the first failed write: the test then
// sees a container restart, which fails the soak (a write must never fail
// because carve was killed).
const soakWriterScript = `set -u
d=/data/w
mkdir -p "$d" || exit 1
id=$(cut -c1-8 /proc/sys/kernel/random/uuid) || exit 1
i=0
while [ "$i" -lt "$1" ]; do
	i=$((i+1))
	f=$d/$id-$i.d
	head -c 4096 /dev/urandom >"$f" || exit 1
	sync "$f" "$d" || exit 1
	s=$(sha256sum "$f") || exit 1
	echo "$i ${s%% *} ok" >>"$d/$id.ack" || exit 1
	sync "$d/$id.ack" || exit 1
	sleep 1
done
exec sleep 86400`

// soakWriterFiles bounds the files of one writer (4 KiB each).
const soakWriterFiles = 300

// soakReadScript prints every acknowledgement log ("ack ID", then its
// lines) and then every file's SHA-256 ("sums", then sha256sum's lines).
// sync first: what the test reads is on the disk, so a snapshot requested
// after the read holds it.
const soakReadScript = `sync
cd /data/w 2>/dev/null || exit 0
for a in *.ack; do
	[ -e "$a" ] || continue
	echo "ack ${a%.ack}"
	cat "$a"
	echo
done
echo sums
ls | grep '\.d$' | xargs -r sha256sum`

// writerPod is a pod on claim whose container runs soakWriterScript, on
// VM node node.
func writerPod(name, claim, node string) *corev1.Pod {
	p := pod(name, claim)
	p.Labels = map[string]string{soakLabel: "true"}
	onNode(node)(p)
	p.Spec.Containers[0].Command = []string{"sh", "-c", soakWriterScript, "writer", fmt.Sprint(soakWriterFiles)}
	return p
}

func soakLabelled(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolumeClaim {
	c.Labels = map[string]string{soakLabel: "true"}
	return c
}

func quantity(bytes int64) string { return resource.NewQuantity(bytes, resource.BinarySI).String() }

// soakKey is obj's key: cluster-scoped kinds have no namespace.
func soakKey(name string, obj client.Object) types.NamespacedName {
	switch o := obj.(type) {
	case *corev1.PersistentVolumeClaim, *corev1.Pod, *v1alpha1.VolumeMove:
		return types.NamespacedName{Namespace: testNS, Name: name}
	case *unstructured.Unstructured:
		if o.GetKind() == "VolumeSnapshot" {
			return types.NamespacedName{Namespace: testNS, Name: name}
		}
	}
	return types.NamespacedName{Name: name}
}

// named is an object to look up by name.
type named struct {
	name string
	obj  client.Object
}

// allGone tells whether every one of objs is gone; else it says which is
// still there.
func allGone(ctx context.Context, objs ...named) (bool, error) {
	for _, o := range objs {
		if ok, err := gone(h.kc.Get(ctx, soakKey(o.name, o.obj), o.obj)); !ok || err != nil {
			return false, fmt.Errorf("%s %s still there (%v)", kindOf(o.obj), o.name, err)
		}
	}
	return true, nil
}

// volumeSnapshotContent is an empty VolumeSnapshotContent to read into.
func volumeSnapshotContent() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("snapshot.storage.k8s.io/v1")
	u.SetKind("VolumeSnapshotContent")
	return u
}

// kindOf names obj's kind, for messages.
func kindOf(obj client.Object) string {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.GetKind()
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")
}

// podSummary is a pod's phase and its container's state, for messages.
func podSummary(p *corev1.Pod) string {
	out := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			out += fmt.Sprintf(", %s waiting: %s %s", cs.Name, w.Reason, w.Message)
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			out += fmt.Sprintf(", %s: %s", c.Type, c.Message)
		}
	}
	return out
}
