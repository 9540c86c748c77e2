// Command demo shows Carve at work on real LVM: it makes a volume group on a
// scratch disk, starts `carve standalone`, and walks one volume through the
// whole CSI lifecycle over gRPC, printing each step and what LVM says.
// `make demo` runs it inside the test VM; on a machine with device-mapper it
// runs as root anywhere: demo --disk /dev/sdX --carve ./bin/carve (the disk
// is wiped).
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"carve.dev/carve/lvm"
	"carve.dev/carve/lvm/runner"
	"carve.dev/carve/test/csiflow"
)

const (
	vg   = "demo"
	node = "demo-node"
)

func main() {
	disk := flag.String("disk", "", "scratch disk to build the volume group on (wiped)")
	carve := flag.String("carve", "", "path of the carve binary")
	flag.Parse()
	if *disk == "" || *carve == "" {
		fmt.Fprintln(os.Stderr, "usage: demo --disk /dev/vdX --carve path/to/carve")
		os.Exit(2)
	}
	if err := run(*disk, *carve); err != nil {
		fmt.Fprintf(os.Stderr, "\nDEMO FAILED: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("\nDemo finished: every step behaved.")
}

var stepNo int

func step(format string, args ...any) {
	stepNo++
	fmt.Printf("\n[%2d] %s\n", stepNo, fmt.Sprintf(format, args...))
}

func run(disk, carveBin string) error {
	ctx := context.Background()
	work, err := os.MkdirTemp("", "carve-demo-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	env, err := lvm.WritePrivateConfig(filepath.Join(work, "lvm"))
	if err != nil {
		return err
	}
	l := lvm.New(runner.New(0, env...))

	step("vgcreate %s on %s (private LVM config, nothing touches /etc/lvm)", vg, disk)
	if err := l.CreateVG(ctx, vg, disk); err != nil {
		return err
	}
	defer func() { _ = l.RemoveVG(ctx, vg); _ = l.RemovePVs(ctx, disk) }()

	sock := filepath.Join(work, "csi.sock")
	step("start: carve standalone --volume-groups=%s --node-id=%s --path-root=%s", vg, node, work)
	stop, err := startCarve(carveBin, sock, env, filepath.Join(work, "carve.log"))
	if err != nil {
		return err
	}
	defer stop()
	c, err := csiflow.Dial("unix://" + sock)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	info, err := c.Identity.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
	if err != nil {
		return err
	}
	fmt.Printf("     driver %s %s is up\n", info.GetName(), info.GetVendorVersion())
	return lifecycle(ctx, c, l, work)
}

func startCarve(bin, sock string, env []string, logPath string) (func(), error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	// The demo is the CO: its staging and target paths are in its work
	// directory, the socket's, which carve is told to keep to.
	cmd := exec.Command(bin, "standalone", "--endpoint=unix://"+sock, "--volume-groups="+vg, "--node-id="+node,
		"--path-root="+filepath.Dir(sock))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		_ = logf.Close()
	}
	// A dial, not the socket file: the file exists from bind(), before
	// carve listens.
	for range 300 {
		if c, err := net.DialTimeout("unix", sock, time.Second); err == nil {
			_ = c.Close()
			return stop, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	return nil, fmt.Errorf("carve did not listen on %s; its log: %s", sock, logPath)
}

func showLV(ctx context.Context, l *lvm.Client, v *csiflow.Volume) {
	lv, err := l.GetLV(ctx, vg, filepath.Base(v.ID))
	if err != nil {
		fmt.Printf("     lvs: %v\n", err)
		return
	}
	state := "inactive (nothing on the node can write to it)"
	if lv.Active {
		state = "ACTIVE, device " + lv.Path
	}
	fmt.Printf("     lvs: %s/%s %d MiB, %s, tags %v\n", lv.VGName, lv.Name, lv.Size>>20, state, lv.Tags)
}

func lifecycle(ctx context.Context, c *csiflow.Client, l *lvm.Client, work string) error {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	step("CreateVolume pvc-demo, 64 MiB, ext4")
	v, err := c.Create(ctx, "pvc-demo", 64<<20, map[string]string{"volumeGroup": vg, "fsType": "ext4"}, csiflow.MountCap(mode, ""))
	if err != nil {
		return err
	}
	fmt.Printf("     volume id %s, %d bytes\n", v.ID, v.Capacity)
	showLV(ctx, l, v)

	staging, target := filepath.Join(work, "staging"), filepath.Join(work, "pod-volume")
	step("ControllerPublishVolume to %s (attach = activate the LV)", node)
	if err := v.Attach(ctx, node); err != nil {
		return err
	}
	fmt.Printf("     publish context %v\n", v.PublishContext)
	showLV(ctx, l, v)

	step("NodeStageVolume: blank device, so mkfs.ext4, then mount at the staging path")
	if err := v.Stage(ctx, staging); err != nil {
		return err
	}
	step("NodePublishVolume: bind mount into the pod's path %s", target)
	if err := v.Publish(ctx, target, false); err != nil {
		return err
	}
	data := bytes.Repeat([]byte("carve keeps your data. "), 1<<15)
	step("write %d bytes through the pod's path", len(data))
	file := filepath.Join(target, "hello.txt")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	fmt.Printf("     sha256 %x\n", sum[:8])

	step("NodeUnpublishVolume, NodeUnstageVolume, ControllerUnpublishVolume (detach = deactivate)")
	if err := v.Down(ctx, target); err != nil {
		return err
	}
	showLV(ctx, l, v)

	step("attach, stage, publish again: the filesystem is found, not reformatted")
	if err := v.Up(ctx, node, staging, target); err != nil {
		return err
	}
	got, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("data read back differs from what was written")
	}
	gotSum := sha256.Sum256(got)
	fmt.Printf("     read back %d bytes, sha256 %x: identical\n", len(got), gotSum[:8])

	step("NodeGetVolumeStats")
	st, err := c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: target})
	if err != nil {
		return err
	}
	for _, u := range st.GetUsage() {
		fmt.Printf("     %s: total %d, used %d, available %d\n", u.GetUnit(), u.GetTotal(), u.GetUsed(), u.GetAvailable())
	}

	if err := growAndSnapshot(ctx, c, l, v, work, target, data); err != nil {
		return err
	}

	step("tear down and DeleteVolume (the LV is zeroed, then removed)")
	if err := v.Down(ctx, target); err != nil {
		return err
	}
	if err := v.Delete(ctx); err != nil {
		return err
	}
	if _, err := l.GetLV(ctx, vg, filepath.Base(v.ID)); err == nil {
		return fmt.Errorf("LV still exists after DeleteVolume")
	}
	fmt.Println("     lvs: the LV is gone")
	return nil
}

// growAndSnapshot grows the mounted volume online, snapshots it, overwrites
// the file, and restores the snapshot into a new volume that still holds the
// original data.
func growAndSnapshot(ctx context.Context, c *csiflow.Client, l *lvm.Client, v *csiflow.Volume, work, target string, data []byte) error {
	step("ControllerExpandVolume to 128 MiB, then NodeExpandVolume: resize2fs while mounted")
	if _, err := c.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: v.ID, CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20}, VolumeCapability: v.Cap}); err != nil {
		return err
	}
	if _, err := c.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.ID, VolumePath: target, VolumeCapability: v.Cap}); err != nil {
		return err
	}
	showLV(ctx, l, v)
	st, err := c.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.ID, VolumePath: target})
	if err != nil {
		return err
	}
	fmt.Printf("     filesystem now %d bytes\n", st.GetUsage()[0].GetTotal())

	step("CreateSnapshot of the mounted thick volume: frozen with a COW snapshot, copied into its own LV")
	var snap *csi.Snapshot
	for try := 0; snap == nil || !snap.GetReadyToUse(); try++ {
		if try == 100 {
			return fmt.Errorf("snapshot not ready after %d calls", try)
		}
		resp, err := c.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-demo", SourceVolumeId: v.ID})
		if err != nil {
			return err
		}
		snap = resp.GetSnapshot()
		fmt.Printf("     snapshot %s ready_to_use=%v\n", snap.GetSnapshotId(), snap.GetReadyToUse())
	}
	file := filepath.Join(target, "hello.txt")
	step("overwrite the file in the volume")
	if err := os.WriteFile(file, []byte("overwritten"), 0o644); err != nil {
		return err
	}

	step("CreateVolume from the snapshot, publish it, read the file")
	resp, err := c.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-restored", CapacityRange: &csi.CapacityRange{RequiredBytes: 128 << 20},
		VolumeCapabilities: []*csi.VolumeCapability{v.Cap}, Parameters: map[string]string{"volumeGroup": vg},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.GetSnapshotId()}}},
	})
	if err != nil {
		return err
	}
	r := c.Wrap(resp.GetVolume(), v.Cap)
	rt := filepath.Join(work, "restored")
	if err := r.Up(ctx, node, filepath.Join(work, "restored-staging"), rt); err != nil {
		return err
	}
	got, err := os.ReadFile(filepath.Join(rt, "hello.txt"))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("restored file differs from the snapshot point")
	}
	fmt.Printf("     restored volume %s holds the %d bytes of the snapshot point\n", r.ID, len(got))
	if err := r.Down(ctx, rt); err != nil {
		return err
	}
	if err := r.Delete(ctx); err != nil {
		return err
	}
	_, err = c.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshotId()})
	return err
}
