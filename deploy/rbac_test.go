package deploy

import (
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// ---------------------------------------------------------------------------
// RBAC

// need is one permission a component uses.
type need struct {
	sa, group, resource string
	namespaced          bool // the resource lives in the pod's namespace
	verbs               []string
	why                 string
}

// needs: what each ServiceAccount's processes call. carve's entries come
// from driver/backend (controller: direct client), and
// driver/agent (node: controller-runtime's cached client, hence
// list/watch for every Get); the sidecars' from their upstream rbac.yaml.
var needs = []need{
	{controller, "lvm.carve.dev", "logicalvolumes", false, []string{"get", "list", "create", "patch", "delete"}, "backend: volumes, publish"},
	{controller, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"get", "list", "create", "delete"}, "backend: snapshots"},
	{controller, "lvm.carve.dev", "logicalvolumegroupsnapshots", false, []string{"get", "list", "watch", "create", "delete"}, "backend: group snapshots"},
	{controller, "lvm.carve.dev", "nodestorages", false, []string{"get", "list", "watch"}, "backend: capacity; /healthz; nodeloss"},
	{controller, "", "nodes", false, []string{"get", "list", "watch"}, "nodeloss: a lost node is gone or out of service"},
	{controller, "lvm.carve.dev", "volumemoves", true, []string{"get", "list", "watch", "update", "patch"}, "move: the walk, its finalizer"},
	{controller, "lvm.carve.dev", "volumemoves/status", true, []string{"update", "patch"}, "move: the steps"},
	{controller, "", "persistentvolumeclaims", true, []string{"get", "list", "watch", "create", "delete", "update", "patch"}, "move: the claim made again"},
	{controller, "", "persistentvolumes", false, []string{"get", "list", "watch", "create", "update", "patch", "delete"}, "move: the new PV, the old one Retain and deleted"},
	{controller, "storage.k8s.io", "storageclasses", false, []string{"get", "list", "watch"}, "move: the class's parameters of the new volume"},
	{controller, "events.k8s.io", "events", false, []string{"create", "patch"}, "nodeloss: Released, NodeLost"},
	{controller, "coordination.k8s.io", "leases", true, []string{"get", "create", "update"}, "leader election (carve and sidecars)"},
	{controller, "", "events", true, []string{"create", "patch"}, "leader election events"},
	{controller, "", "persistentvolumes", false, []string{"get", "list", "watch", "create", "patch", "delete"}, "csi-provisioner"},
	{controller, "", "persistentvolumeclaims", false, []string{"get", "list", "watch", "update"}, "csi-provisioner"},
	{controller, "storage.k8s.io", "storageclasses", false, []string{"get", "list", "watch"}, "csi-provisioner"},
	{controller, "", "events", false, []string{"create", "patch"}, "sidecars' events on PVCs"},
	{controller, "storage.k8s.io", "csinodes", false, []string{"get", "list", "watch"}, "csi-provisioner, csi-attacher"},
	{controller, "", "nodes", false, []string{"get", "list", "watch"}, "csi-provisioner topology"},
	{controller, "storage.k8s.io", "volumeattachments", false, []string{"get", "list", "watch", "patch"}, "csi-attacher"},
	{controller, "storage.k8s.io", "volumeattachments/status", false, []string{"patch"}, "csi-attacher"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshots", false, []string{"get", "list", "watch", "update"}, "csi-provisioner restore"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotcontents", false, []string{"get", "list", "watch", "update", "patch"}, "csi-snapshotter"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotcontents/status", false, []string{"update", "patch"}, "csi-snapshotter"},
	{controller, "snapshot.storage.k8s.io", "volumesnapshotclasses", false, []string{"get", "list", "watch"}, "csi-snapshotter"},
	{controller, "groupsnapshot.storage.k8s.io", "volumegroupsnapshotclasses", false, []string{"get", "list", "watch"}, "csi-snapshotter: group snapshots"},
	{controller, "groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents", false, []string{"get", "list", "watch", "update", "patch"}, "csi-snapshotter: group snapshots"},
	{controller, "groupsnapshot.storage.k8s.io", "volumegroupsnapshotcontents/status", false, []string{"update", "patch"}, "csi-snapshotter: group snapshots"},
	{controller, "storage.k8s.io", "csistoragecapacities", true, []string{"get", "list", "watch", "create", "update", "patch", "delete"}, "csi-provisioner --enable-capacity"},
	{controller, "", "pods", true, []string{"get"}, "csi-provisioner capacity owner lookup"},
	{controller, "apps", "replicasets", true, []string{"get"}, "csi-provisioner capacity owner lookup"},
	{controller, "", "persistentvolumeclaims/status", false, []string{"patch"}, "csi-resizer"},
	{controller, "", "pods", false, []string{"get", "list", "watch"}, "csi-resizer"},
	{controller, "storage.k8s.io", "volumeattributesclasses", false, []string{"get", "list", "watch"}, "csi-resizer"},
	{node, "lvm.carve.dev", "logicalvolumes", false, []string{"get", "list", "watch", "update"}, "agent: reconcile, finalizers"},
	{node, "lvm.carve.dev", "logicalvolumes/status", false, []string{"update"}, "agent: status"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"get", "list", "watch", "update"}, "agent: reconcile, finalizers"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots/status", false, []string{"update"}, "agent: status"},
	{node, "lvm.carve.dev", "logicalvolumegroupsnapshots", false, []string{"get", "list", "watch", "update"}, "agent: reconcile, finalizers"},
	{node, "lvm.carve.dev", "logicalvolumegroupsnapshots/status", false, []string{"update"}, "agent: status"},
	{node, "lvm.carve.dev", "nodestorages", false, []string{"get", "list", "watch", "create"}, "agent: storage report (cached Get)"},
	{node, "lvm.carve.dev", "nodestorages/status", false, []string{"update"}, "agent: storage report"},
	{node, "events.k8s.io", "events", false, []string{"create", "patch"}, "agent: events on its resources"},
}

// denied: what a ServiceAccount must not be able to do.
var denied = []need{
	{node, "lvm.carve.dev", "logicalvolumes", false, []string{"create", "delete"}, "only the controller creates and deletes volumes"},
	{node, "lvm.carve.dev", "logicalvolumesnapshots", false, []string{"create", "delete"}, "only the controller creates and deletes snapshots"},
	{node, "lvm.carve.dev", "logicalvolumegroupsnapshots", false, []string{"create", "delete"}, "only the controller creates and deletes group snapshots"},
	{node, "lvm.carve.dev", "nodestorages", false, []string{"delete"}, "a node only reports"},
	{node, "lvm.carve.dev", "volumemoves", true, []string{"get", "create", "update", "patch", "delete"}, "moves are the tenants' and the controller's"},
	{node, "lvm.carve.dev", "volumemoves/status", true, []string{"update", "patch"}, "moves are the tenants' and the controller's"},
	{controller, "lvm.carve.dev", "logicalvolumes/status", false, []string{"update", "patch"}, "status is the agent's"},
	{controller, "lvm.carve.dev", "volumemoves", true, []string{"create", "delete"}, "a move is the tenant's to make and delete"},
	{controller, "lvm.carve.dev", "logicalvolumegroupsnapshots/status", false, []string{"update", "patch"}, "status is the agent's"},
	{controller, "", "secrets", true, []string{"get", "list"}, "no secrets are used"},
	{node, "", "secrets", true, []string{"get", "list"}, "no secrets are used"},
}

// grants is what each ServiceAccount may do, from the bindings.
type grant struct {
	rule      rbacv1.PolicyRule
	namespace string // "" for cluster-wide (ClusterRoleBinding)
}

func collectGrants(t *testing.T, objs []object, ns string) map[string][]grant {
	t.Helper()
	clusterRoles := map[string][]rbacv1.PolicyRule{}
	roles := map[string][]rbacv1.PolicyRule{} // namespace/name
	for _, o := range objs {
		switch o.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			strict(t, o, &r)
			clusterRoles[r.Name] = r.Rules
		case "Role":
			var r rbacv1.Role
			strict(t, o, &r)
			roles[r.Namespace+"/"+r.Name] = r.Rules
		}
	}
	out := map[string][]grant{}
	add := func(o object, subjects []rbacv1.Subject, rules []rbacv1.PolicyRule, ok bool, scope string) {
		if !ok {
			t.Errorf("%v: binds a role that is not in the manifests", o)
		}
		for _, s := range subjects {
			if s.Kind != "ServiceAccount" || s.Namespace != ns {
				t.Errorf("%v: subject %s %s/%s, want a ServiceAccount in %s", o, s.Kind, s.Namespace, s.Name, ns)
				continue
			}
			for _, r := range rules {
				out[s.Name] = append(out[s.Name], grant{r, scope})
			}
		}
	}
	for _, o := range objs {
		switch o.Kind {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			strict(t, o, &b)
			rules, ok := clusterRoles[b.RoleRef.Name]
			add(o, b.Subjects, rules, ok && b.RoleRef.Kind == "ClusterRole", "")
		case "RoleBinding":
			var b rbacv1.RoleBinding
			strict(t, o, &b)
			var rules []rbacv1.PolicyRule
			ok := false
			if b.RoleRef.Kind == "Role" {
				rules, ok = roles[b.Namespace+"/"+b.RoleRef.Name]
			} else {
				rules, ok = clusterRoles[b.RoleRef.Name]
			}
			add(o, b.Subjects, rules, ok, b.Namespace)
		}
	}
	return out
}

func allows(gs []grant, group, resource, verb string, namespaced bool, ns string) bool {
	for _, g := range gs {
		if g.namespace != "" && (!namespaced || g.namespace != ns) {
			continue
		}
		r := g.rule
		if (slices.Contains(r.APIGroups, group) || slices.Contains(r.APIGroups, "*")) &&
			(slices.Contains(r.Resources, resource) || slices.Contains(r.Resources, "*")) &&
			(slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) && len(r.ResourceNames) == 0 {
			return true
		}
	}
	return false
}

// gr names a resource of a group for messages ("pods" of the core group).
func gr(resource, group string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func checkRBAC(t *testing.T, objs []object, ns string) {
	t.Helper()
	checkTenantRoles(t, objs)
	for _, sa := range []string{controller, node} {
		if o, ok := find(objs, "ServiceAccount", sa); !ok || o.Namespace != ns {
			t.Errorf("no ServiceAccount %s in %s", sa, ns)
		}
	}
	grants := collectGrants(t, objs, ns)
	for _, n := range needs {
		for _, v := range n.verbs {
			if !allows(grants[n.sa], n.group, n.resource, v, n.namespaced, ns) {
				t.Errorf("RBAC: %s cannot %s %s (%s)", n.sa, v, gr(n.resource, n.group), n.why)
			}
		}
	}
	for _, n := range denied {
		for _, v := range n.verbs {
			if allows(grants[n.sa], n.group, n.resource, v, n.namespaced, ns) {
				t.Errorf("RBAC: %s may %s %s, it should not: %s", n.sa, v, gr(n.resource, n.group), n.why)
			}
		}
	}
	for sa, gs := range grants {
		for _, g := range gs {
			if slices.Contains(g.rule.Verbs, "*") || slices.Contains(g.rule.Resources, "*") || slices.Contains(g.rule.APIGroups, "*") {
				t.Errorf("RBAC: %s has a wildcard rule %+v", sa, g.rule)
			}
		}
	}
}

// checkImages lists the images of the pod specs; with allowRegistry false
// (the base as written: placeholder names that kustomize's images: turn
// into references) none may name a registry.
func checkImages(t *testing.T, objs []object, allowRegistry bool) []string {
	t.Helper()
	var images []string
	for _, o := range objs {
		spec, ok := podSpec(t, o)
		if !ok {
			continue
		}
		for _, c := range spec.Containers {
			images = append(images, c.Image)
			first, _, hasSlash := strings.Cut(c.Image, "/")
			if !allowRegistry && hasSlash && (strings.ContainsAny(first, ".:") || first == "localhost") {
				t.Errorf("%v: image %q names a registry; use a placeholder and an override", o, c.Image)
			}
		}
	}
	return images
}

// checkAll runs every object check.
func checkAll(t *testing.T, objs []object, ns, kubelet string) {
	t.Helper()
	decodeAll(t, objs)
	checkCSIDriver(t, objs)
	checkNodeDaemonSet(t, objs, kubelet)
	checkControllerDeployment(t, objs)
	checkRBAC(t, objs, ns)
	checkNodePolicy(t, objs, ns)
}

// checkTenantRoles: a tenant who may edit a namespace (the built-in admin
// and edit roles, through aggregation) may create and delete VolumeMoves
// there, one who may view it may read them, and neither role reaches
// anything else of Carve's.
func checkTenantRoles(t *testing.T, objs []object) {
	t.Helper()
	aggregated := map[string][]rbacv1.PolicyRule{}
	for _, o := range objs {
		if o.Kind != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole
		strict(t, o, &r)
		for _, to := range []string{"admin", "edit", "view"} {
			if r.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
				aggregated[to] = append(aggregated[to], r.Rules...)
			}
		}
	}
	for role, verbs := range map[string][]string{"admin": {"create", "delete", "get", "list", "watch"},
		"edit": {"create", "delete", "get", "list", "watch"}, "view": {"get", "list", "watch"}} {
		gs := make([]grant, 0, len(aggregated[role]))
		for _, r := range aggregated[role] {
			gs = append(gs, grant{rule: r})
			if !slices.Equal(r.Resources, []string{"volumemoves"}) || !slices.Equal(r.APIGroups, []string{"lvm.carve.dev"}) {
				t.Errorf("RBAC: a role aggregated to %s grants %v of %v: tenants get VolumeMoves only", role, r.Resources, r.APIGroups)
			}
		}
		for _, v := range verbs {
			if !allows(gs, "lvm.carve.dev", "volumemoves", v, true, "shop") {
				t.Errorf("RBAC: the built-in %s role cannot %s volumemoves", role, v)
			}
		}
		if role == "view" && allows(gs, "lvm.carve.dev", "volumemoves", "create", true, "shop") {
			t.Error("RBAC: the built-in view role may create volumemoves")
		}
	}
}
