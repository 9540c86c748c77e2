package apiserver_test

import (
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// TestVolumeMoveForTenants: with deploy's tenant roles, a user granted
// the edit role of VolumeMoves in their namespace (as the built-in edit
// role aggregates it; aggregation itself is kube-controller-manager's,
// which this API server runs without) creates a VolumeMove there and
// nowhere else, and may not write its status, which is the controller's.
// The CRD refuses a claim or node that is no object name, and a change
// of the spec once made.
func TestVolumeMoveForTenants(t *testing.T) {
	admin, err := client.New(server.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	applyFile(t, admin, filepath.Join("deploy", "kubernetes", "base", "rbac-tenant.yaml"))
	for _, n := range []string{"shop", "elsewhere"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "alice-moves"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: rbacv1.GroupName, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "carve-volumemoves-edit"}}
	if err := admin.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(server.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	alice, err := client.New(cfg, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	move := func(ns, name, claim, to string) *v1alpha1.VolumeMove {
		return &v1alpha1.VolumeMove{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.VolumeMoveSpec{Claim: claim, ToNode: to}}
	}

	m := move("shop", "data-web-0-to-node-b", "data-web-0", "node-b")
	if err := alice.Create(ctx, m); err != nil {
		t.Fatalf("a tenant creating a VolumeMove in their namespace: %v", err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, m) })
	if err := alice.Create(ctx, move("elsewhere", "m", "data-web-0", "node-b")); !apierrors.IsForbidden(err) {
		t.Errorf("a VolumeMove in another namespace: %v, want forbidden", err)
	}
	m.Status.Phase = v1alpha1.MoveMoved
	if err := alice.Status().Update(ctx, m); !apierrors.IsForbidden(err) {
		t.Errorf("a tenant writing a VolumeMove's status: %v, want forbidden", err)
	}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
		t.Fatal(err)
	}
	m.Spec.ToNode = "node-c"
	if err := alice.Update(ctx, m); !apierrors.IsInvalid(err) {
		t.Errorf("a change of toNode once made: %v, want invalid", err)
	}
	for name, bad := range map[string]*v1alpha1.VolumeMove{
		"a claim that is no name": move("shop", "bad-claim", "Data_Web/0", "node-b"),
		"no node":                 move("shop", "no-node", "data-web-0", ""),
		"a node that is no name":  move("shop", "bad-node", "data-web-0", "node b"),
	} {
		if err := alice.Create(ctx, bad); !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want invalid", name, err)
		}
	}
}
