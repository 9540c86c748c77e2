package deploy

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// nodePolicy: the ValidatingAdmissionPolicy (and its binding) that lets
// carve node change only its own node's resources. What it allows and
// refuses is tested on a real API server (test/apiserver); here, that it
// is shipped whole: bound with Deny, failing closed, matching the node's
// ServiceAccount in the namespace it is deployed in, on every Carve
// resource that ServiceAccount may write. Its name is the base's
// nodePolicy; a Helm release other than "carve" prefixes it with its own.
const nodePolicy = "carve-node-own-node"

func checkNodePolicy(t *testing.T, objs []object, ns string) {
	t.Helper()
	var policies []object
	for _, o := range objs {
		if o.Kind == "ValidatingAdmissionPolicy" {
			policies = append(policies, o)
		}
	}
	if len(policies) != 1 {
		t.Fatalf("ValidatingAdmissionPolicies %v, want one (%s)", policies, nodePolicy)
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	strict(t, policies[0], &p)
	name := p.Name
	if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("policy %s: failurePolicy must be Fail", name)
	}
	want := `request.userInfo.username == "system:serviceaccount:` + ns + `:` + node + `"`
	if len(p.Spec.MatchConditions) != 1 || p.Spec.MatchConditions[0].Expression != want {
		t.Errorf("policy %s: matchConditions %+v, want the one condition %s", name, p.Spec.MatchConditions, want)
	}
	if len(p.Spec.Validations) == 0 {
		t.Errorf("policy %s: no validations", name)
	}
	for _, v := range p.Spec.Validations {
		if v.MessageExpression == "" {
			t.Errorf("policy %s: validation %q has no messageExpression", name, v.Expression)
		}
	}

	// Every write of a Carve resource that RBAC grants the node's
	// ServiceAccount is matched.
	ops := map[string][]admissionregistrationv1.OperationType{
		"create": {admissionregistrationv1.Create}, "update": {admissionregistrationv1.Update},
		"patch": {admissionregistrationv1.Update}, "delete": {admissionregistrationv1.Delete},
	}
	grants := collectGrants(t, objs, ns)[node]
	for _, g := range grants {
		if !slices.Contains(g.rule.APIGroups, driverName) {
			continue
		}
		for _, res := range g.rule.Resources {
			for _, verb := range g.rule.Verbs {
				for _, op := range ops[verb] {
					if !policyMatches(&p, res, op) {
						t.Errorf("policy %s does not match %s of %s, which RBAC grants %s", name, op, gr(res, driverName), node)
					}
				}
			}
		}
	}
	// And more than RBAC grants today, should it ever grant more: every
	// resource of deploy/crds, and its status, a CRD added later included.
	var plurals []string
	for _, res := range carveResources(t) {
		plurals = append(plurals, res.plural)
		if res.tenant {
			// A tenant's object names no node, and the node's
			// ServiceAccount may not write it at all (denied).
			continue
		}
		// The policy's node of an object is a NodeStorage's name, and any
		// other resource's spec.nodeName, which must be there.
		if res.plural != "nodestorages" && !res.nodeName {
			t.Errorf("%s has no required spec.nodeName, which policy %s reads as its node", gr(res.plural, driverName), name)
		}
		rs := []string{res.plural}
		if res.status {
			rs = append(rs, res.plural+"/status")
		}
		for _, r := range rs {
			for _, op := range []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete} {
				if !policyMatches(&p, r, op) {
					t.Errorf("policy %s does not match %s of %s", name, op, gr(r, driverName))
				}
			}
		}
	}
	for _, want := range []string{"logicalvolumes", "logicalvolumesnapshots", "logicalvolumegroupsnapshots", "nodestorages"} {
		if !slices.Contains(plurals, want) {
			t.Errorf("deploy/crds has no %s (it has %v)", gr(want, driverName), plurals)
		}
	}

	var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
	strict(t, mustFind(t, objs, "ValidatingAdmissionPolicyBinding", name), &b)
	if b.Spec.PolicyName != name || !slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny) ||
		b.Spec.ParamRef != nil || b.Spec.MatchResources != nil {
		t.Errorf("binding %s: %+v, want policy %s, action Deny, no params, no narrowing", name, b.Spec, name)
	}
}

// policyMatches tells whether p's resource rules match op on resource
// ("logicalvolumes", "logicalvolumes/status") of Carve's group.
func policyMatches(p *admissionregistrationv1.ValidatingAdmissionPolicy, resource string, op admissionregistrationv1.OperationType) bool {
	if p.Spec.MatchConstraints == nil {
		return false
	}
	for _, r := range p.Spec.MatchConstraints.ResourceRules {
		if len(r.ResourceNames) > 0 || !slices.Contains(r.APIGroups, driverName) && !slices.Contains(r.APIGroups, "*") ||
			!slices.Contains(r.APIVersions, "*") && !slices.Contains(r.APIVersions, "v1alpha1") {
			continue
		}
		if (slices.Contains(r.Operations, op) || slices.Contains(r.Operations, admissionregistrationv1.OperationAll)) &&
			slices.Contains(r.Resources, resource) {
			return true
		}
	}
	return false
}
