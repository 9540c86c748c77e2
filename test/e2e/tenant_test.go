//go:build e2e

package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"carve.dev/carve/driver/api/v1alpha1"
)

// tenantUser has rights in testNS only: to read its claims, pods,
// VolumeSnapshots and events, as a namespace's user of a shared cluster
// does. Nothing cluster-scoped, so none of Carve's resources.
const tenantUser = "e2e-tenant"

var (
	tenantOnce   sync.Once
	tenantClient client.Client
	tenantErr    error
)

// asTenant is a client that acts as tenantUser (impersonated by the
// admin), its Role and RoleBinding made on first use.
func asTenant(t *testing.T) client.Client {
	t.Helper()
	tenantOnce.Do(func() { tenantClient, tenantErr = newTenant() })
	if tenantErr != nil {
		t.Fatalf("the tenant's client: %v", tenantErr)
	}
	return tenantClient
}

func newTenant() (client.Client, error) {
	ctx := context.Background()
	read := []string{"get", "list", "watch"}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: tenantUser, Namespace: testNS}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "pods", "events"}, Verbs: read},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: read},
		{APIGroups: []string{"snapshot.storage.k8s.io"}, Resources: []string{"volumesnapshots"}, Verbs: read},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: tenantUser, Namespace: testNS},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: tenantUser}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: tenantUser}}
	for _, o := range []client.Object{role, binding} {
		if err := h.kc.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", h.adminKC)
	if err != nil {
		return nil, err
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: tenantUser}
	return client.New(cfg, client.Options{Scheme: h.kc.Scheme()})
}

// tenantSees waits until the tenant can read an event of carve node about
// obj (by UID, as `kubectl describe` selects them) with reason whose
// message contains text, and returns that message.
func tenantSees(t *testing.T, obj client.Object, reason, text string) string {
	t.Helper()
	c := asTenant(t)
	var seen []string
	var found string
	defer func() {
		if t.Failed() {
			t.Logf("events the tenant read about %s: %q", obj.GetName(), seen)
		}
	}()
	wait(t, "the tenant reads carve-node's "+reason+" event about "+obj.GetName(), 2*time.Minute,
		func(ctx context.Context) (bool, error) {
			var list corev1.EventList
			err := c.List(ctx, &list, client.InNamespace(obj.GetNamespace()),
				client.MatchingFields{"involvedObject.uid": string(obj.GetUID())})
			if apierrors.IsForbidden(err) {
				return false, nil // the RoleBinding is not in the authorizer's cache yet
			}
			seen = seen[:0]
			for _, e := range list.Items {
				seen = append(seen, e.ReportingController+" "+e.Reason+": "+e.Message)
				if e.ReportingController == "carve-node" && e.Reason == reason && strings.Contains(e.Message, text) {
					found = e.Message
					return true, nil
				}
			}
			return false, err
		})
	t.Logf("the tenant reads about %s: %s: %s", obj.GetName(), reason, found)
	return found
}

// tenantCannotReadResources: the tenant's events come to them; Carve's
// cluster-scoped resources stay closed to them.
func tenantCannotReadResources(t *testing.T) {
	t.Helper()
	err := asTenant(t).List(context.Background(), &v1alpha1.LogicalVolumeList{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("the tenant listing LogicalVolumes: %v, want Forbidden", err)
	}
}
