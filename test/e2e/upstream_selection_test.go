//go:build e2e

package e2e

import "strings"

// The upstream suite's selection. Spec texts read
// "External Storage [Driver: lvm.carve.dev] [Testpattern: P] SUITE SPEC";
// each entry below is a regexp matched against that. test/README.md lists
// the same, with the counts and durations of the last full run.

// upstreamCI is the subset (CARVE_E2E_UPSTREAM=subset) run with the thick
// driver: at least one spec of every test suite the driver file enables and
// of every test pattern, the cheapest that still goes through the suite's
// own path. It is meant for CI once the budget has room for it.
var upstreamCI = []string{
	`\(default fs\)\] provisioning should provision storage with pvc data source$`,
	`\(ext4\)\] volumes should store data$`,
	`\(default fs\)\] volumeIO should write files of various sizes, verify size, validate content`,
	`\(block volmode\)\] volumeMode should fail to use a volume in a pod with mismatched mode`,
	`\(default fs\)\] subPath should support existing directory$`,
	`\(xfs\)\] multiVolume should concurrently access the single volume from pods on the same node \[`,
	`\(default fs\)\(allowExpansion\)\] volume-expand should resize volume when PVC is edited while pod is using it`,
	`\(block volmode\)\(allowExpansion\)\] volume-expand Verify if offline PVC expansion works`,
	`volumeLimits should verify that all csinodes have volume limits`,
	`topology should provision a volume and schedule a pod with AllowedTopologies`,
	`topology should fail to schedule a pod which has topologies that conflict with AllowedTopologies`,
	`capacity provides storage capacity information`,
	`fsgroupchangepolicy \(Always\)\[LinuxOnly\], pod created with an initial fsgroup, new pod fsgroup applied to volume contents`,
	`Generic Ephemeral-volume \(default fs\) \(late-binding\)\] ephemeral should create read/write inline ephemeral volume`,
	`Generic Ephemeral-volume \(block volmode\) \(late-binding\)\] ephemeral should support two pods which have the same volume definition`,
	`read-write-once-pod should block a second pod from using an in-use ReadWriteOncePod volume on the same node`,
	`\(default fs\)\] volume-modify .*should recover from invalid target VAC by updating PVC to new valid VAC`,
	`\(default fs\)\] volume-stress multiple pods should access different volumes repeatedly`,
	`\(block volmode\)\] volume-modify-stress.* multiple pods should provision volumes with volumeAttributesClass`,
}

// upstreamCIThin is the thin driver's share of the subset: what differs
// from thick volumes (thin snapshots, of every snapshot pattern, and what
// is made from them), and a read-only ephemeral volume. Each snapshot
// pattern runs the one spec it does not skip: Dynamic and Pre-provisioned
// snapshots the persistent volume's, Ephemeral snapshots the inline one's.
// (Every immediate-binding Generic Ephemeral spec skips itself on a
// cluster with more than one topology segment; the immediate-binding
// pattern runs with the topology specs above.)
var upstreamCIThin = []string{
	`(Dynamic|Pre-provisioned) Snapshot \((delete|retain) policy\)\] snapshottable.*check deletion \(persistent\)`,
	`Ephemeral Snapshot \((delete|retain) policy\)\] snapshottable.*check deletion \(ephemeral\)`,
	`\(default fs\)\] provisioning should provision storage with snapshot data source \[`,
	`Generic Ephemeral-volume \(default fs\) \(late-binding\)\] ephemeral should create read-only inline ephemeral volume`,
	`\(block volmode\)\] volume-modify .*should create a volume with VAC`,
	`Dynamic Snapshot \(delete policy\)\] snapshottable-stress.* should support snapshotting of many volumes repeatedly`,
}

// upstreamSkip: the specs that cannot work on this cluster, whatever the
// driver, each with its reason. Never a spec that fails because of Carve.
var upstreamSkip = []struct{ pattern, reason string }{
	{`\[Disruptive\]`, "restarts kubelet or the node through SSH; the e2e's nodes have no SSH (Carve's own " +
		"TestRestartsConverge and TestNodePodReplaced restart its pods and kubelet's node)"},
	{`provisioning should provision storage with any volume data source`, "the spec deploys a volume populator " +
		"(hello-populator) and the volume-data-source-validator, whose images no " +
		"registry here serves and whose Go modules (kubernetes-csi/lib-volume-populator, " +
		"volume-data-source-validator) the module proxy refuses, so they cannot be built either; Carve's part " +
		"(a blank volume for the populator's prime claim) is what every provisioning spec exercises"},
	{`volume-modify-stress.* multiple pods should modify volumes with a different volumeAttributesClass`, "the spec " +
		"makes claims, builds their pods' objects but never creates them, and sets the claims' " +
		"volumeAttributesClassName at once; under a WaitForFirstConsumer class (every class of Carve's) " +
		"such a claim is never bound, and the API server refuses the change (422: spec is immutable after " +
		"creation except resources.requests and volumeAttributesClassName for bound claims), before Carve " +
		"is asked anything. The suite's other spec, and volume-modify's specs on bound claims, run"},
	{`volumegroupsnapshottable`, "the suite makes its VolumeGroupSnapshotClass with the pattern's deletion " +
		"policy among the class's parameters (parameters[\"deletionPolicy\"], which csi-snapshotter hands to " +
		"the driver), and Carve refuses a class parameter it does not know, as for every class " +
		"(INVALID_ARGUMENT: unknown snapshot parameter \"deletionPolicy\", seen in csi-snapshotter's log); " +
		"Carve's own TestVolumeGroupSnapshot takes a VolumeGroupSnapshot through the same sidecars"},
}

func upstreamSkipRegexp() string {
	var p []string
	for _, s := range upstreamSkip {
		p = append(p, s.pattern)
	}
	return strings.Join(p, "|")
}
