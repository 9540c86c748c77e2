package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Ready is the resource's ConditionReady, nil before the agent wrote one.
func (lv *LogicalVolume) Ready() *metav1.Condition {
	return meta.FindStatusCondition(lv.Status.Conditions, ConditionReady)
}

// Ready is the resource's ConditionReady, nil before the agent wrote one.
func (s *LogicalVolumeSnapshot) Ready() *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, ConditionReady)
}

// Ready is the resource's ConditionReady, nil before the agent wrote one.
func (g *LogicalVolumeGroupSnapshot) Ready() *metav1.Condition {
	return meta.FindStatusCondition(g.Status.Conditions, ConditionReady)
}
