package hyperconverged

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// Condition types, as the upstream operator reports them.
const (
	ConditionAvailable         = "Available"
	ConditionProgressing       = "Progressing"
	ConditionDegraded          = "Degraded"
	ConditionReconcileComplete = "ReconcileComplete"
)

// Condition reasons.
const (
	ReasonInstalled     = "CatalogInstalled"
	ReasonInstallFailed = "CatalogInstallFailed"
	ReasonNotSingleton  = "NotTheSingleton"
	ReasonNotReady      = "ComponentsNotReady"
)

// VersionName is the entry of status.versions that names the component
// images running.
const VersionName = "tekvirt"

// SingletonName is the one HyperConverged name the controller acts on, as
// the upstream operator enforces.
const SingletonName = "kubevirt-hyperconverged"

// observed is what one reconcile saw.
type observed struct {
	installed int
	// components counts the deployed components; notReady names those
	// not running their current version everywhere yet.
	components int
	notReady   []string
	// version is the component images' (Images.Version).
	version string
	err     error
	// notSingleton is set for a HyperConverged that is not the one acted on.
	notSingleton bool
	// templateAPI says where the Template API comes from; templates counts
	// the common templates installed.
	templateAPI string
	templates   int
}

// setConditions writes the status conditions for what a reconcile observed.
func setConditions(hc *hcov1beta1.HyperConverged, o observed) {
	gen := hc.Generation
	set := func(t string, s metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&hc.Status.Conditions, metav1.Condition{
			Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	hc.Status.ObservedGeneration = gen
	switch {
	case o.notSingleton:
		msg := fmt.Sprintf("only the HyperConverged named %q is reconciled; delete this one", SingletonName)
		set(ConditionAvailable, metav1.ConditionFalse, ReasonNotSingleton, msg)
		set(ConditionProgressing, metav1.ConditionFalse, ReasonNotSingleton, msg)
		set(ConditionDegraded, metav1.ConditionTrue, ReasonNotSingleton, msg)
		set(ConditionReconcileComplete, metav1.ConditionFalse, ReasonNotSingleton, msg)
	case o.err != nil:
		msg := o.err.Error()
		set(ConditionAvailable, metav1.ConditionFalse, ReasonInstallFailed, msg)
		set(ConditionProgressing, metav1.ConditionTrue, ReasonInstallFailed, msg)
		set(ConditionDegraded, metav1.ConditionTrue, ReasonInstallFailed, msg)
		set(ConditionReconcileComplete, metav1.ConditionFalse, ReasonInstallFailed, msg)
	case len(o.notReady) > 0:
		hc.Status.InstalledObjects = o.installed
		msg := "waiting for " + strings.Join(o.notReady, ", ")
		set(ConditionAvailable, metav1.ConditionFalse, ReasonNotReady, msg)
		set(ConditionProgressing, metav1.ConditionTrue, ReasonNotReady, msg)
		set(ConditionDegraded, metav1.ConditionFalse, ReasonNotReady, msg)
		set(ConditionReconcileComplete, metav1.ConditionTrue, ReasonNotReady, msg)
	default:
		hc.Status.InstalledObjects = o.installed
		msg := fmt.Sprintf("%d catalog objects installed in %s", o.installed, hc.CatalogNamespace())
		if o.components > 0 {
			msg = fmt.Sprintf("%d components ready; %s", o.components, msg)
		}
		if o.version != "" {
			hc.Status.Versions = []hcov1beta1.Version{{Name: VersionName, Version: o.version}}
		}
		set(ConditionAvailable, metav1.ConditionTrue, ReasonInstalled, msg)
		set(ConditionProgressing, metav1.ConditionFalse, ReasonInstalled, msg)
		set(ConditionDegraded, metav1.ConditionFalse, ReasonInstalled, msg)
		set(ConditionReconcileComplete, metav1.ConditionTrue, ReasonInstalled, msg)
	}
}
