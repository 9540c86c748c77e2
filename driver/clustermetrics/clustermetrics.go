// Package clustermetrics reads what carve controller's metrics say of the
// cluster (metrics.ReadCluster): when each node's agent last reported, and
// which volumes, snapshots and group snapshots their agent has work left
// on. It reads the controller's informer cache at each scrape, so it costs
// the API server nothing and is never staler than the cache.
//
// A resource is done when its agent has reported on its current
// generation (the backend's waits end there too), without a failure, and
// its Ready condition is True. Otherwise it is unfinished, in one of three
// states:
//   - waiting: the agent has not reported on the latest generation (a
//     creation, change or deletion it has not taken up or not finished);
//   - working: it has, and data work runs (a copy, a wipe, a raid1 sync:
//     Ready False with no failure);
//   - failing: it has, and the attempt failed (status.error); the agent
//     retries with back-off.
//
// Each unfinished resource is dated: a deletion from its deletion
// timestamp, a resource never reported on from its creation, working and
// failing from when Ready went False, and a change from when this reader
// first saw it (no timestamp records it; a restart of the controller
// starts that count again, so an alert on it comes late, never early).
package clustermetrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
	"carve.dev/carve/driver/metrics"
	"carve.dev/carve/driver/nodeloss"
)

// The states and kinds of metrics.Unfinished.
const (
	Waiting = "waiting"
	Working = "working"
	Failing = "failing"

	KindVolume        = "volume"
	KindSnapshot      = "snapshot"
	KindGroupSnapshot = "group_snapshot"
)

// Reader reads the cluster's state from Cache (carve controller's).
type Reader struct {
	Cache client.Reader
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.Mutex
	seen map[types.UID]seen // changes not reported on, when first seen
}

type seen struct {
	generation int64
	at         time.Time
}

// Read lists the NodeStorages and the three kinds of resources from the
// cache (metrics.ReadCluster's read).
func (r *Reader) Read(ctx context.Context) (metrics.ClusterState, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	// The cache's objects are only read here: no deep copy of each.
	noCopy := client.UnsafeDisableDeepCopy
	var (
		nodes  v1alpha1.NodeStorageList
		vols   v1alpha1.LogicalVolumeList
		snaps  v1alpha1.LogicalVolumeSnapshotList
		groups v1alpha1.LogicalVolumeGroupSnapshotList
	)
	for _, l := range []client.ObjectList{&nodes, &vols, &snaps, &groups} {
		if err := r.Cache.List(ctx, l, noCopy); err != nil {
			return metrics.ClusterState{}, fmt.Errorf("list %T: %w", l, err)
		}
	}
	st := metrics.ClusterState{Reports: map[string]time.Time{}}
	for i := range nodes.Items {
		ns := &nodes.Items[i]
		if nodeloss.Marked(ns) {
			continue
		}
		at := ns.Status.UpdateTime.Time
		if at.IsZero() {
			at = ns.CreationTimestamp.Time
		}
		st.Reports[ns.Name] = at
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	t := now()
	keep := map[types.UID]seen{}
	add := func(kind, node string, obj metav1.Object, rep report) {
		state, since, ok := r.unfinished(obj, rep, t, keep)
		if ok {
			st.Unfinished = append(st.Unfinished, metrics.Unfinished{Kind: kind, Node: node, State: state, Since: since})
		}
	}
	for i := range vols.Items {
		lv := &vols.Items[i]
		add(KindVolume, lv.Spec.NodeName, lv, report{lv.Status.ObservedGeneration, lv.Status.Error != nil, lv.Status.Phase, lv.Status.Conditions})
	}
	for i := range snaps.Items {
		s := &snaps.Items[i]
		add(KindSnapshot, s.Spec.NodeName, s, report{s.Status.ObservedGeneration, s.Status.Error != nil, s.Status.Phase, s.Status.Conditions})
	}
	for i := range groups.Items {
		g := &groups.Items[i]
		add(KindGroupSnapshot, g.Spec.NodeName, g, report{g.Status.ObservedGeneration, g.Status.Error != nil, g.Status.Phase, g.Status.Conditions})
	}
	r.seen = keep
	return st, nil
}

// report is what the agent last wrote of a resource.
type report struct {
	observed   int64
	failed     bool
	phase      v1alpha1.Phase
	conditions []metav1.Condition
}

// unfinished says whether obj has work left, in which state and since
// when (see the package comment). What no timestamp dates is dated from
// r.seen, and kept in keep for the next read.
func (r *Reader) unfinished(obj metav1.Object, rep report, now time.Time, keep map[types.UID]seen) (string, time.Time, bool) {
	firstSeen := func() time.Time {
		s, ok := r.seen[obj.GetUID()]
		if !ok || s.generation != obj.GetGeneration() {
			s = seen{generation: obj.GetGeneration(), at: now}
		}
		keep[obj.GetUID()] = s
		return s.at
	}
	ready := meta.FindStatusCondition(rep.conditions, v1alpha1.ConditionReady)
	notReady := ready != nil && ready.Status == metav1.ConditionFalse
	current := rep.observed == obj.GetGeneration()
	switch {
	case current && rep.failed:
		if notReady {
			return Failing, ready.LastTransitionTime.Time, true
		}
		return Failing, firstSeen(), true
	case current && notReady:
		return Working, ready.LastTransitionTime.Time, true
	case obj.GetDeletionTimestamp() != nil:
		return Waiting, obj.GetDeletionTimestamp().Time, true
	case rep.observed == 0 || (ready == nil && rep.phase != v1alpha1.PhaseReady):
		return Waiting, obj.GetCreationTimestamp().Time, true
	case !current:
		return Waiting, firstSeen(), true
	}
	return "", time.Time{}, false
}
