//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	certv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/nodecert"
)

// TestEveryNodeServesTransfers: installed as deploy/ has it, carve
// controller signs and every carve node gets its transfer certificate
// (a CertificateSigningRequest to lvm.carve.dev/transfer, approved and
// issued by the controller for that node's name alone) and publishes
// its pod's address, port 7443, in its NodeStorage: what another node
// dials to restore one of its snapshots.
func TestEveryNodeServesTransfers(t *testing.T) {
	t.Parallel()
	for _, node := range allNodes() {
		want := net.JoinHostPort(carvePod(t, "node", node).Status.PodIP, "7443")
		wait(t, node+"'s transfer address in its NodeStorage", 3*time.Minute, func(ctx context.Context) (bool, error) {
			var ns v1alpha1.NodeStorage
			if err := h.kc.Get(ctx, client.ObjectKey{Name: node}, &ns); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return ns.Status.TransferAddress == want, nil
		})
	}
	var csrs certv1.CertificateSigningRequestList
	if err := h.kc.List(context.Background(), &csrs); err != nil {
		t.Fatal(err)
	}
	issued := map[string]bool{}
	for _, csr := range csrs.Items {
		if csr.Spec.SignerName != nodecert.SignerName {
			continue
		}
		approved := slices.ContainsFunc(csr.Status.Conditions, func(c certv1.CertificateSigningRequestCondition) bool {
			return c.Type == certv1.CertificateApproved && c.Status == corev1.ConditionTrue
		})
		block, _ := pem.Decode(csr.Status.Certificate)
		if !approved || block == nil {
			t.Errorf("transfer certificate request %s from %s: approved %v, certificate issued %v", csr.Name, csr.Spec.Username, approved, block != nil)
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Errorf("transfer certificate of %s: %v", csr.Name, err)
			continue
		}
		if len(cert.DNSNames) != 1 {
			t.Errorf("transfer certificate of %s names %v; want one node's name", csr.Name, cert.DNSNames)
			continue
		}
		issued[cert.DNSNames[0]] = true
	}
	for _, node := range allNodes() {
		if !issued[node] {
			t.Errorf("no transfer certificate issued for node %s (issued: %v)", node, issued)
		}
	}
}

// TestRestoreOnTheOtherNode: a VolumeSnapshot taken on one VM node is
// restored for a pod that may run only on the other. The scheduler puts
// the claim there, carve controller places the volume there, and that
// node's carve node receives the snapshot's data from its peer over the
// pods' network (mutual TLS, the certificates of TestEveryNodeServesTransfers):
// the pod reads the snapshot's bytes, the claim's tenant reads how far
// the copy got, and nothing is left on either node once both are deleted.
func TestRestoreOnTheOtherNode(t *testing.T) {
	t.Parallel()
	thickAndThin(t, restoreOnTheOtherNode)
}

func restoreOnTheOtherNode(t *testing.T, class string) {
	src, snap, dst := class+"-far-src", class+"-far-snap", class+"-far"
	create(t, pvc(src, class, "256Mi"))
	p := runPodWith(t, src+"-1", src, onNode(vmNode))
	want := writeBlob(t, p, "blob", 64)
	vs := takeSnapshot(t, snap, src)
	if writeBlob(t, p, "blob", 64) == want { // after the snapshot: not restored
		t.Fatal("two blobs of random bytes have the same digest")
	}

	restored := restoreClaim(dst, class, "256Mi", snap)
	pv := readOnTheOtherNode(t, restored, want)
	for node, want := range map[string]bool{vmNode2: true, vmNode: false} {
		if l, err := lvOn(node, pv); err != nil || (l != nil) != want {
			t.Errorf("LV %s on %s: %v (error %v); want it there: %v", pv, node, l != nil, err, want)
		}
	}
	tenantSees(t, restored, "Copying", "% done")

	deleteRestore(t, src, dst, vs)
	wait(t, "the restored LV and the snapshot's removed", 2*time.Minute, func(context.Context) (bool, error) {
		left, err := lvOn(vmNode2, pv)
		if left != nil || err != nil {
			return false, err
		}
		return snapshotLVsGone(vmNode)
	})
}

// TestCloneOnTheOtherNode: a claim cloned for a pod that may run only on
// the other VM node than its source's. carve controller takes a snapshot
// of the source on its node, the clone's node receives it as a restore,
// and the snapshot goes once the copy is in: the pod reads the source's
// bytes, the claim's tenant reads how far the copy got, and nothing is
// left on either node once both claims are deleted.
func TestCloneOnTheOtherNode(t *testing.T) {
	t.Parallel()
	thickAndThin(t, cloneOnTheOtherNode)
}

func cloneOnTheOtherNode(t *testing.T, class string) {
	src, dst := class+"-far-origin", class+"-far-clone"
	create(t, pvc(src, class, "256Mi"))
	p := runPodWith(t, src+"-1", src, onNode(vmNode))
	want := writeBlob(t, p, "blob", 64)

	clone := pvc(dst, class, "256Mi")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: src}
	pv := readOnTheOtherNode(t, clone, want)
	if l, err := lvOn(vmNode2, pv); err != nil || l == nil {
		t.Errorf("LV %s on %s: %v (error %v)", pv, vmNode2, l, err)
	}
	tenantSees(t, clone, "Copying", "% done")
	wait(t, "the snapshot the clone went through removed", 2*time.Minute, func(ctx context.Context) (bool, error) {
		var list v1alpha1.LogicalVolumeSnapshotList
		if err := h.kc.List(ctx, &list); err != nil {
			return false, err
		}
		for _, s := range list.Items {
			if s.Annotations[v1alpha1.AnnotationCloneFor] == pv {
				return false, nil
			}
		}
		return snapshotLVsGone(vmNode)
	})

	deletePod(t, dst+"-1")
	deletePod(t, src+"-1")
	deleteClaim(t, dst)
	deleteClaim(t, src)
	wait(t, "the clone's LV removed", 2*time.Minute, func(context.Context) (bool, error) {
		left, err := lvOn(vmNode2, pv)
		return left == nil && err == nil, err
	})
}

// readOnTheOtherNode creates claim, made from a source on vmNode, runs
// a pod with it on vmNode2 (pod claim-1), checks that it reads the blob
// of digest want, and returns the claim's volume.
func readOnTheOtherNode(t *testing.T, claim *corev1.PersistentVolumeClaim, want string) string {
	t.Helper()
	create(t, claim)
	start := time.Now()
	p := runPodWith(t, claim.Name+"-1", claim.Name, onNode(vmNode2))
	t.Logf("%s running on %s in %v", claim.Name, vmNode2, time.Since(start).Round(time.Second))
	if got := blobSum(t, p, "blob"); got != want {
		t.Errorf("claim %s on %s holds a blob of digest %s; its source's is %s", claim.Name, vmNode2, got, want)
	}
	return boundClaim(t, claim.Name).Spec.VolumeName
}

// writeBlob writes mib MiB of random bytes to file on the pod's volume,
// syncs them and returns their MD5 digest.
func writeBlob(t *testing.T, p *corev1.Pod, file string, mib int) string {
	t.Helper()
	inContainer(t, p, "sh", "-c", `dd if=/dev/urandom of="/data/$1" bs=1M count="$2" 2>/dev/null && sync "/data/$1"`,
		"sh", file, fmt.Sprint(mib))
	return blobSum(t, p, file)
}

// blobSum is the MD5 digest of file on the pod's volume.
func blobSum(t *testing.T, p *corev1.Pod, file string) string {
	t.Helper()
	sum, _, _ := strings.Cut(inContainer(t, p, "md5sum", "/data/"+file), " ")
	return sum
}

// TestTransferRefusesStrangers: carve node's transfer port, reached over
// the pods' network from the other VM node, completes no exchange with a
// client that shows no certificate, or one the cluster's transfer CA did
// not sign (a self-signed one naming that node): the server ends the
// handshake with a TLS alert.
func TestTransferRefusesStrangers(t *testing.T) {
	t.Parallel()
	addr := net.JoinHostPort(carvePod(t, "node", vmNode2).Status.PodIP, "7443")
	v := nodeVM(t, vmNode)
	// openssl s_client, from carve-vm's own network namespace; with TLS
	// 1.3 the client's side of the handshake ends before the server has
	// checked the client's certificate, so the refusal shows as the
	// server's alert, whatever s_client's exit status. -ign_eof keeps
	// s_client reading after its input ends, until the server closes
	// the connection (or the timeout): without it s_client quit at the
	// end of its input and, on a loaded machine, before the alert came.
	script := `set -u
addr=$1
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
case $2 in
self-signed)
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj "/CN=$3" \
		-addext "subjectAltName=DNS:$3" -keyout "$d/key" -out "$d/crt" 2>/dev/null || exit 3
	set -- -cert "$d/crt" -key "$d/key" ;;
*) set -- ;;
esac
echo ping | timeout 60 openssl s_client -connect "$addr" -tls1_3 -noservername -verify_quiet -ign_eof "$@" 2>&1
exit 0`
	for _, client := range []string{"no certificate", "self-signed"} {
		out, err := v.sh("sh", "-c", script, "sh", addr, strings.Fields(client)[0], vmNode)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		alert := regexp.MustCompile(`(?i)alert (certificate required|bad certificate|unknown ca|handshake failure)`).FindString(out)
		if alert == "" {
			t.Errorf("a client with %s at %s: no refusal from the server; openssl said:\n%s", client, addr, out)
			continue
		}
		t.Logf("a client with %s at %s: refused (%s)", client, addr, alert)
	}
}

// TestTransferSurvivesCrashes: a restore on the other node goes on
// through a crash of each end. The sender (carve-vm's carve node) reads
// its disks at 4 MiB/s, so the copy of the 512 MiB snapshot is caught
// in the act: the receiver's carve node is killed once a segment is
// checked in (its LV's tag records it), and its next run resumes from
// that record, not from byte 0; then the sender's is killed, which drops
// the connection, and the receiver's next try resumes again. The pod
// reads the snapshot's bytes. Not parallel: it kills both nodes' agents.
func TestTransferSurvivesCrashes(t *testing.T) {
	fullRunOnly(t)
	create(t, pvc("xfer-src", "carve-thick", "512Mi"))
	p := runPodWith(t, "xfer-src-1", "xfer-src", onNode(vmNode))
	want := writeBlob(t, p, "blob", 128)
	vs := takeSnapshot(t, "xfer-snap", "xfer-src")

	slow := throttleNode(t)
	defer slow.undo()
	slow.limit(t, []string{"/dev/vda", "/dev/vdb"}, 4*mi) // node-vm.sh's PVs
	restored := restoreClaim("xfer", "carve-thick", "512Mi", "xfer-snap")
	create(t, restored)
	create(t, podWith("xfer-1", "xfer", onNode(vmNode2)))
	lvName := claimLV(restored)
	first := waitCheckpoint(t, lvName, 0)
	killContainer(t, carvePod(t, "node", vmNode2), "carve", "KILL")
	resumed := waitResumed(t, lvName, first)
	t.Logf("the receiver, killed after %d bytes were in, resumed at byte %d", first, resumed)

	second := waitCheckpoint(t, lvName, resumed)
	killContainer(t, carvePod(t, "node", vmNode), "carve", "KILL")
	slow.undo()
	again := waitResumed(t, lvName, second)
	t.Logf("the sender killed after %d bytes were in; the receiver's next try resumed at byte %d", second, again)

	p2 := waitRunning(t, "xfer-1", 8*time.Minute)
	if got := blobSum(t, p2, "blob"); got != want {
		t.Errorf("the volume restored through two crashes holds a blob of digest %s; the snapshot's is %s", got, want)
	}
	deleteRestore(t, "xfer-src", "xfer", vs)
}

// copiedTag is the receiver's record of how far a transfer into an LV has
// been checked in (lvmvol's carve.dev/copied=SOURCE:BYTES).
var copiedTag = regexp.MustCompile(`carve\.dev/copied=[^,\s]*:([0-9]+)`)

// waitCheckpoint waits until the transfer into LV name on the other VM
// node has recorded more than after bytes, and returns the record.
func waitCheckpoint(t *testing.T, name string, after int64) int64 {
	t.Helper()
	var at int64
	wait(t, fmt.Sprintf("a checkpoint past byte %d in %s's tags on %s", after, name, vmNode2), 5*time.Minute,
		func(context.Context) (bool, error) {
			tags, err := nodeVM(t, vmNode2).sh("lvs", "--noheadings", "-o", "lv_tags", "e2e/"+name)
			if err != nil {
				return false, nil // not made yet
			}
			m := copiedTag.FindStringSubmatch(tags)
			if m == nil {
				return false, nil
			}
			at, err = strconv.ParseInt(m[1], 10, 64)
			return err == nil && at > after, err
		})
	return at
}

// waitResumed waits until carve node on the other VM node logs that it
// receives into LV name from a byte past 0, and returns that byte, which
// must be at least the checkpoint seen before the crash.
func waitResumed(t *testing.T, name string, checkpoint int64) int64 {
	t.Helper()
	line := regexp.MustCompile(`"Receiving a snapshot from another node" lv="e2e/` + regexp.QuoteMeta(name) + `" .*from=([0-9]+)`)
	var from int64
	wait(t, fmt.Sprintf("carve node on %s resuming the transfer into %s", vmNode2, name), 5*time.Minute,
		func(context.Context) (bool, error) {
			logs, _ := filepath.Glob(filepath.Join(h.logs, vmNode2, "vm-pods", "*carve-node*", "carve", "*.log"))
			for _, f := range logs {
				b, err := os.ReadFile(f)
				if err != nil {
					continue
				}
				for _, m := range line.FindAllSubmatch(b, -1) {
					n, _ := strconv.ParseInt(string(m[1]), 10, 64)
					from = max(from, n)
				}
			}
			return from >= checkpoint && from > 0, nil
		})
	return from
}
