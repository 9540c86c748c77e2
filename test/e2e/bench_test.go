//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestClusterBench is the cluster-mode figure (make bench-cluster,
// CARVE_E2E_BENCH=1; skipped otherwise): how long a pod with a new
// WaitForFirstConsumer claim takes to run, and a StatefulSet of
// CARVE_E2E_BENCH_REPLICAS (50) replicas to all run, against the sum of
// the raw steps their volumes need on the same VM node (lvcreate as
// Carve's thick class makes it, mkfs.ext4, mount, bind mount), run there
// one after the other, and against the same StatefulSet on pre-provisioned
// local volumes (Kubernetes' own share; the goal is Carve's StatefulSet
// within twice the raw steps plus that share). It prints the figures and
// writes them to _output/bench/cluster.json. It asserts nothing on speed.
func TestClusterBench(t *testing.T) {
	benchOnly(t)
	replicas := 50
	if v := os.Getenv("CARVE_E2E_BENCH_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CARVE_E2E_BENCH_REPLICAS=%q: want a positive number", v)
		}
		replicas = n
	}
	// The e2e overlay caps a node at 32 volumes (for the upstream
	// volumeLimits specs); the StatefulSet needs more.
	setMaxVolumes(t, replicas+8)

	rawOne := rawSteps(t, 1)
	var single []time.Duration
	var carve []float64
	for i := range 3 {
		before := readCSISeconds(t)
		single = append(single, podWithNewClaim(t, fmt.Sprintf("bench-single-%d", i)))
		calls := readCSISeconds(t).minus(before)
		carve = append(carve, calls.setup())
		t.Logf("pod %d: %.1f s to Running, of which Carve's CSI calls %.1f s (then the deletion's; by call: %s)", i, single[i].Seconds(), calls.setup(), calls)
	}
	rawAll := rawSteps(t, replicas)
	local, localDown := localStatefulSet(t, replicas)
	localDown()
	sts, down := statefulSetUp(t, "bench-sts", "carve-thick", replicas, onNode(vmNode))

	res := clusterBench{Replicas: replicas, RawOneSeconds: rawOne.Seconds(), RawAllSeconds: rawAll.Seconds(),
		StatefulSetSeconds: sts.Seconds(), LocalStatefulSetSeconds: local.Seconds()}
	for _, d := range single {
		res.PodSeconds = append(res.PodSeconds, d.Seconds())
	}
	res.CarveCSISeconds = carve
	res.print(t)
	writeFigures(t, "cluster.json", res)
	down()
}

type clusterBench struct {
	Replicas   int       `json:"replicas"`
	PodSeconds []float64 `json:"pod_with_claim_seconds"`
	// CarveCSISeconds: the time Carve spent in the CSI calls each pod
	// waited for (csiSeconds.setup).
	CarveCSISeconds    []float64 `json:"carve_csi_seconds"`
	RawOneSeconds      float64   `json:"raw_one_volume_seconds"`
	StatefulSetSeconds float64   `json:"statefulset_seconds"`
	RawAllSeconds      float64   `json:"raw_all_volumes_seconds"`
	// LocalStatefulSetSeconds: the same StatefulSet on pre-provisioned
	// local PersistentVolumes of the same node (no CSI driver at all):
	// Kubernetes' own share of the figure.
	LocalStatefulSetSeconds float64 `json:"local_statefulset_seconds"`
}

func (r clusterBench) print(t *testing.T) {
	med := slices.Clone(r.PodSeconds)
	slices.Sort(med)
	p := med[(len(med)-1)/2]
	carve := slices.Clone(r.CarveCSISeconds)
	slices.Sort(carve)
	if len(carve) > 0 {
		t.Logf("Carve's CSI calls a pod waited for (CreateVolume, ControllerPublishVolume, NodeStageVolume, NodePublishVolume): median %.1f s of %v",
			carve[(len(carve)-1)/2], r.CarveCSISeconds)
	}
	t.Logf("cluster mode against the raw steps on the same node (goal: ratio <= 1.3)\n"+
		"  pod + new claim to Running: %.1f s (median of %d: %v); raw lvcreate+mkfs+mount+bind: %.1f s; ratio %.2f\n"+
		"  StatefulSet of %d to all Running: %.1f s; raw steps of %d volumes, one after the other: %.1f s; ratio %.2f",
		p, len(r.PodSeconds), r.PodSeconds, r.RawOneSeconds, p/r.RawOneSeconds,
		r.Replicas, r.StatefulSetSeconds, r.Replicas, r.RawAllSeconds, r.StatefulSetSeconds/r.RawAllSeconds)
	budget := r.RawAllSeconds + r.LocalStatefulSetSeconds
	t.Logf("StatefulSet of %d on pre-provisioned local volumes (Kubernetes' share): %.1f s; "+
		"Carve's StatefulSet against raw steps plus that share (%.1f s): ratio %.2f (goal: <= 2)",
		r.Replicas, r.LocalStatefulSetSeconds, budget, r.StatefulSetSeconds/budget)
}

// benchOnly skips a benchmark unless make bench-cluster runs it.
func benchOnly(t *testing.T) {
	if os.Getenv("CARVE_E2E_BENCH") == "" {
		t.Skip("a benchmark: make bench-cluster runs it (CARVE_E2E_BENCH=1)")
	}
}

// writeFigures writes a benchmark's figures, as JSON, to name in
// _output/bench.
func writeFigures(t *testing.T, name string, figures any) {
	path := filepath.Join(h.repo, "_output", "bench", name)
	b, err := json.MarshalIndent(figures, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("written to %s", path)
}

// perVolumeGuard is the hang guard of a script that makes or removes n
// volumes in the VM, one after the other: about 0.7 s a volume on a quiet
// machine, and 50 of them on a loaded one outran vmexec's default 2
// minutes.
func perVolumeGuard(n int) time.Duration {
	return hangGuard(time.Minute + time.Duration(n)*5*time.Second)
}

// rawSteps makes n volumes by hand in the VM as Carve's thick class and
// the node path make them (lvcreate, mkfs.ext4, mount, bind mount), one
// after the other, and returns how long that took; it then removes them
// (not timed).
func rawSteps(t *testing.T, n int) time.Duration {
	t.Helper()
	script := `set -e
n=$1 dir=/run/carve-bench-raw
mkdir -p $dir
start=$(date +%s%N)
for i in $(seq $n); do
	lvcreate -q -y -L 100m --zero y --wipesignatures y -n bench-raw-$i e2e >/dev/null
	mkfs.ext4 -q -F /dev/e2e/bench-raw-$i
	mkdir -p $dir/s$i $dir/p$i
	mount /dev/e2e/bench-raw-$i $dir/s$i
	mount --bind $dir/s$i $dir/p$i
done
end=$(date +%s%N)
for i in $(seq $n); do
	umount $dir/p$i $dir/s$i
	lvremove -q -y e2e/bench-raw-$i >/dev/null
done
echo $(( (end - start) / 1000000 ))`
	out, err := nodeVM(t, vmNode).shWithin(perVolumeGuard(n), "bash", "-c", script, "bash", strconv.Itoa(n))
	if err != nil {
		t.Fatal(err)
	}
	ms, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatalf("raw steps: %q: %v", out, err)
	}
	return time.Duration(ms) * time.Millisecond
}

// podWithNewClaim times a pod on a new claim from creation to Running,
// then removes both (not timed).
func podWithNewClaim(t *testing.T, name string) time.Duration {
	t.Helper()
	start := time.Now()
	create(t, pvc(name, "carve-thick", "100Mi"))
	create(t, podWith(name, name, onNode(vmNode)))
	waitRunning(t, name, 5*time.Minute)
	d := time.Since(start)
	deletePod(t, name)
	deleteClaim(t, name)
	return d
}

// statefulSetUp times a StatefulSet of n replicas, each with its own new
// claim (Parallel: the pods start together, as for a database cluster
// scaled out), from creation to all Running; its pod template is pod's
// with mutate applied. down removes it and its claims.
func statefulSetUp(t *testing.T, name, class string, n int, mutate func(*corev1.Pod)) (time.Duration, func()) {
	t.Helper()
	labels := map[string]string{"app": name}
	p := podWith("x", "data", mutate)
	p.Spec.Volumes = nil
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(int32(n)), PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: p.Spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
						corev1.ResourceStorage: resource.MustParse("100Mi")}},
				},
			}},
		},
	}
	start := time.Now()
	create(t, sts)
	wait(t, fmt.Sprintf("%d replicas of %s running", n, name), time.Hour, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := h.kc.List(ctx, &pods, client.InNamespace(testNS), client.MatchingLabels(labels)); err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
	d := time.Since(start)
	t.Logf("%d replicas running after %s", n, d.Round(time.Second))
	return d, func() { statefulSetDown(t, sts, n) }
}

// statefulSetDown deletes the StatefulSet, its pods and then all its
// claims at once, and waits until their PVs are gone.
func statefulSetDown(t *testing.T, sts *appsv1.StatefulSet, n int) {
	t.Helper()
	ctx := context.Background()
	if err := h.kc.Delete(ctx, sts); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		deletePod(t, fmt.Sprintf("%s-%d", sts.Name, i))
	}
	var pvs []string
	for i := range n {
		pvs = append(pvs, startClaimDelete(t, fmt.Sprintf("data-%s-%d", sts.Name, i)))
	}
	start := time.Now()
	wait(t, fmt.Sprintf("the %d PVs gone", n), time.Hour, func(ctx context.Context) (bool, error) {
		for _, pv := range pvs {
			if ok, err := gone(get(ctx, pv, &corev1.PersistentVolume{})); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	t.Logf("%d claims deleted in %s", n, time.Since(start).Round(time.Second))
}

// setMaxVolumes sets carve node's --max-volumes on the DaemonSet and
// waits for the new pods' registration to carry it to the CSINode.
func setMaxVolumes(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	var ds appsv1.DaemonSet
	if err := h.kc.Get(ctx, types.NamespacedName{Namespace: driverNS, Name: "carve-node"}, &ds); err != nil {
		t.Fatal(err)
	}
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Args = slices.DeleteFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--max-volumes=") })
	c.Args = append(c.Args, fmt.Sprintf("--max-volumes=%d", n))
	if err := h.kc.Update(ctx, &ds); err != nil {
		t.Fatal(err)
	}
	wait(t, fmt.Sprintf("CSINode of %s allowing %d volumes", vmNode, n), 5*time.Minute, func(ctx context.Context) (bool, error) {
		var cn storagev1.CSINode
		if err := h.kc.Get(ctx, types.NamespacedName{Name: vmNode}, &cn); err != nil {
			return false, err
		}
		for _, d := range cn.Spec.Drivers {
			if d.Name == driverName && d.Allocatable != nil && d.Allocatable.Count != nil {
				return int(*d.Allocatable.Count) == n, nil
			}
		}
		return false, nil
	})
}

// benchLocalClass is the StorageClass of the pre-provisioned local
// volumes: no provisioner, bound when a pod is scheduled (as Carve's).
const benchLocalClass = "bench-local"

// benchLocalDir is where the VM node mounts them.
const benchLocalDir = "/run/carve-bench-local"

// localStatefulSet times the benchmark's StatefulSet of n replicas on
// volumes that need no CSI driver at all: n ext4 LVs made and mounted on
// the VM node beforehand (not timed) and offered as local
// PersistentVolumes bound to that node. What is left is Kubernetes' own
// work for the same pods (scheduling with volume binding, kubelet's
// volume manager, sandboxes and containers), the share of the figure no
// driver can cut. down removes the StatefulSet, its claims, the PVs and
// the LVs.
func localStatefulSet(t *testing.T, n int) (time.Duration, func()) {
	t.Helper()
	script := `set -e
n=$1 dir=$2
for i in $(seq $n); do
	lvcreate -q -y -L 100m -n bench-local-$i e2e >/dev/null
	mkfs.ext4 -q -F /dev/e2e/bench-local-$i
	mkdir -p $dir/v$i
	mount /dev/e2e/bench-local-$i $dir/v$i
done`
	if out, err := nodeVM(t, vmNode).shWithin(perVolumeGuard(n), "bash", "-c", script, "bash", strconv.Itoa(n), benchLocalDir); err != nil {
		t.Fatalf("local volumes on %s: %v: %s", vmNode, err, out)
	}
	create(t, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: benchLocalClass},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)})
	for i := 1; i <= n; i++ {
		create(t, localPV(i))
	}
	d, _ := statefulSetUp(t, "bench-local", benchLocalClass, n, onNode(vmNode))
	return d, func() { localStatefulSetDown(t, n) }
}

// localPV is the i-th local volume as a PersistentVolume of vmNode.
func localPV(i int) *corev1.PersistentVolume {
	fs := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-local-%d", i)},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("100Mi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              benchLocalClass,
			VolumeMode:                    &fs,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				Local: &corev1.LocalVolumeSource{Path: fmt.Sprintf("%s/v%d", benchLocalDir, i)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{vmNode}}}}}}},
		},
	}
}

// localStatefulSetDown deletes the local StatefulSet, its pods and
// claims, waits for the claims to go, then the PVs, the class and, on
// the node, the mounts and LVs.
func localStatefulSetDown(t *testing.T, n int) {
	t.Helper()
	ctx := context.Background()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "bench-local", Namespace: testNS}}
	if err := h.kc.Delete(ctx, sts); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		deletePod(t, fmt.Sprintf("bench-local-%d", i))
	}
	// Not deleteClaim: a local PV is retained, not deleted with its claim.
	for i := range n {
		startClaimDelete(t, fmt.Sprintf("data-bench-local-%d", i))
	}
	wait(t, "the local claims gone", 5*time.Minute, func(ctx context.Context) (bool, error) {
		for i := range n {
			if ok, err := gone(get(ctx, fmt.Sprintf("data-bench-local-%d", i), &corev1.PersistentVolumeClaim{})); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	for i := 1; i <= n; i++ {
		if err := h.kc.Delete(ctx, localPV(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.kc.Delete(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: benchLocalClass}}); err != nil {
		t.Fatal(err)
	}
	// kubelet may still hold a pod's bind mount of a local volume after
	// the pod object is gone (its volume manager unmounts afterwards), so
	// each LV gets a minute to come free before its removal counts as
	// failed (lvm2: "contains a filesystem in use").
	script := `set -e
n=$1 dir=$2
for i in $(seq $n); do
	umount $dir/v$i
	for try in $(seq 60); do
		lvremove -q -y e2e/bench-local-$i >/dev/null 2>&1 && continue 2
		sleep 1
	done
	lvremove -q -y e2e/bench-local-$i
done`
	if out, err := nodeVM(t, vmNode).shWithin(perVolumeGuard(n)+2*time.Minute, "bash", "-c", script, "bash", strconv.Itoa(n), benchLocalDir); err != nil {
		t.Fatalf("removing the local volumes on %s: %v: %s", vmNode, err, out)
	}
}

// TestTransferBench is the transfer's figure (make bench-cluster,
// CARVE_E2E_BENCH=1; skipped otherwise): a 1 GiB thick volume on
// carve-vm, filled with random bytes (the transfer sends runs of zeroes
// as short frames, so zeroes would flatter it), is snapshotted and
// restored for a pod on carve-vm2; the copy is timed from its
// LogicalVolume's first Copying to its claim's binding, polled each second. Against
// it, a plain copy of the same LV between the two VMs: dd to plain TCP
// over the link, no TLS, no digests, written by dd into a scratch LV
// (O_DIRECT both ends). It prints both and writes them to
// _output/bench/transfer.json. It asserts nothing on speed.
func TestTransferBench(t *testing.T) {
	benchOnly(t)
	create(t, pvc("bench-xfer-src", "carve-thick", "1Gi"))
	p := runPodWith(t, "bench-xfer-src-1", "bench-xfer-src", onNode(vmNode))
	writeBlob(t, p, "blob", 896)
	vs := takeSnapshot(t, "bench-xfer-snap", "bench-xfer-src")
	srcLV := boundClaim(t, "bench-xfer-src").Spec.VolumeName

	restored := restoreClaim("bench-xfer", "carve-thick", "1Gi", "bench-xfer-snap")
	create(t, restored)
	create(t, podWith("bench-xfer-1", "bench-xfer", onNode(vmNode2)))
	carve := timeCopy(t, claimLV(restored), "bench-xfer")
	plain := plainCopy(t, srcLV, 1024)

	res := transferBench{Bytes: 1 << 30, TransferSeconds: carve.Seconds(), PlainSeconds: plain.Seconds()}
	t.Logf("1 GiB of random bytes from %s to %s: Carve's transfer (mutual TLS, a digest per 64 MiB segment, "+
		"read back) %.1f s, %.1f MiB/s; dd over plain TCP on the same link %.1f s, %.1f MiB/s; ratio %.2f",
		vmNode, vmNode2, res.TransferSeconds, 1024/res.TransferSeconds, res.PlainSeconds, 1024/res.PlainSeconds,
		res.TransferSeconds/res.PlainSeconds)
	writeFigures(t, "transfer.json", res)

	deleteRestore(t, "bench-xfer-src", "bench-xfer", vs)
}

// TestMoveBench is the move's figure (make bench-cluster,
// CARVE_E2E_BENCH=1; skipped otherwise): a 1 GiB claim, thick and thin,
// with 820 MiB of random bytes, moved from carve-vm to carve-vm2 while its
// pod writes 102 MiB more (10 % of the claim) during the first copy; the
// pod is deleted at ReadyToCutOver (moveClaim, whose checks it runs). It
// prints the downtime (the catch-up and the swap) against the first copy,
// which is what a move without a catch-up would be down for (the claim
// copied with its workload stopped: thin sends what is allocated, thick
// all of it), and writes them to _output/bench/move-<class>.json. It
// asserts nothing on speed.
func TestMoveBench(t *testing.T) {
	benchOnly(t)
	thickAndThin(t, func(t *testing.T, class string) {
		f := moveClaim(t, moveCase{name: "bench-moved", class: class, size: "1Gi", firstMiB: 820, secondMiB: 102, duringCopy: true})
		t.Logf("%s, 1 GiB, 820 MiB written, 102 MiB more during the first copy: downtime %.0f s against a first copy of %.0f s (ratio %.2f)",
			class, f.DowntimeSeconds, f.CopySeconds, f.DowntimeSeconds/f.CopySeconds)
		writeFigures(t, "move-"+class+".json", f)
	})
}

type transferBench struct {
	Bytes           int64   `json:"bytes"`
	TransferSeconds float64 `json:"transfer_seconds"`
	PlainSeconds    float64 `json:"plain_copy_seconds"`
}

// timeCopy waits for LogicalVolume name to copy, then for claim to be
// bound, which csi-provisioner does once CreateVolume has answered that
// the volume is made, the copy done; it returns how long that took from
// the first Copying seen (to the second).
func timeCopy(t *testing.T, name, claim string) time.Duration {
	t.Helper()
	wait(t, "LogicalVolume "+name+" Copying", 5*time.Minute, func(ctx context.Context) (bool, error) {
		return copying(ctx, name)
	})
	start := time.Now()
	wait(t, "claim "+claim+" bound", 30*time.Minute, func(ctx context.Context) (bool, error) {
		var c corev1.PersistentVolumeClaim
		err := get(ctx, claim, &c)
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	})
	return time.Since(start)
}

// plainCopy copies mib MiB of LV src on carve-vm into a scratch LV of
// carve-vm2 with dd over the link between the VMs (plain TCP), and
// returns how long from the sender's start until the receiving dd had
// written it all.
func plainCopy(t *testing.T, src string, mib int) time.Duration {
	t.Helper()
	v1, v2 := nodeVM(t, vmNode), nodeVM(t, vmNode2)
	if _, err := v2.sh("lvcreate", "-q", "-y", "-L", strconv.Itoa(mib)+"m", "-n", "bench-plain", "e2e"); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := v2.sh("lvremove", "-q", "-y", "e2e/bench-plain"); err != nil {
			t.Error(err)
		}
	}()
	guard := hangGuard(10 * time.Minute)
	// The receiver stops after mib MiB and says how many it wrote.
	recv := make(chan error, 1)
	go func() {
		out, err := v2.shWithin(guard, "bash", "-c",
			`busybox nc -l -p 7999 | dd of=/dev/e2e/bench-plain bs=1M count="$1" iflag=fullblock oflag=direct 2>&1`,
			"bash", strconv.Itoa(mib))
		if err == nil && !strings.Contains(out, strconv.Itoa(mib)+"+0 records out") {
			err = fmt.Errorf("the plain copy's receiver did not write %d MiB: %s", mib, out)
		}
		recv <- err
	}()
	wait(t, "the plain copy's receiver listening", time.Minute, func(context.Context) (bool, error) {
		out, err := v2.sh("ss", "-Hltn", "sport = :7999")
		return err == nil && strings.TrimSpace(out) != "", nil
	})
	// bash's /dev/tcp: busybox nc as the sender ended after a few KiB.
	start := time.Now()
	if _, err := v1.shWithin(guard, "bash", "-c",
		`dd if="$1" bs=1M count="$2" iflag=direct 2>/dev/null >"/dev/tcp/$3/7999"`,
		"bash", dmPath(t, "e2e", src), strconv.Itoa(mib), vmSpec(vmNode2).linkAddress); err != nil {
		t.Fatal(err)
	}
	if err := <-recv; err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}
