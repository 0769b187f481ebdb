package eviction

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	"github.com/tekvirt/tekvirt/controllers/vmi"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;delete

// BudgetReconciler keeps a PodDisruptionBudget over the launcher Pod of
// each running VMI whose strategy refuses evictions (External,
// LiveMigrate, LiveMigrateIfPossible when it can migrate), and none for the
// others, as KubeVirt's disruption budget controller does.
type BudgetReconciler struct {
	Client client.Client
}

// budgetName is the PodDisruptionBudget of a VMI.
func budgetName(v *v1.VirtualMachineInstance) string { return "kubevirt-disruption-budget-" + v.Name }

// Reconcile implements reconcile.Reconciler.
func (r *BudgetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	v := &v1.VirtualMachineInstance{}
	if err := r.Client.Get(ctx, req.NamespacedName, v); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	def, err := ClusterDefault(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := NeedsBudget(Effective(v, def), v.IsMigratable()) && v.DeletionTimestamp == nil && !v.IsFinal()
	return ctrl.Result{}, r.keep(ctx, v, want)
}

// keep makes the VMI's budget exist exactly when want says.
func (r *BudgetReconciler) keep(ctx context.Context, v *v1.VirtualMachineInstance, want bool) error {
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: budgetName(v)}}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)
	switch {
	case apierrors.IsNotFound(err) && want:
		one := intstr.FromInt32(1)
		pdb.Labels = map[string]string{vmi.CreatedByLabel: string(v.UID)}
		pdb.Spec = policyv1.PodDisruptionBudgetSpec{MinAvailable: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{vmi.CreatedByLabel: string(v.UID)}}}
		if err := controllerutil.SetControllerReference(v, pdb, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, pdb); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("protecting the launcher of VMI %s/%s: %w", v.Namespace, v.Name, err)
		}
	case err == nil && !want && metav1.IsControlledBy(pdb, v):
		return client.IgnoreNotFound(r.Client.Delete(ctx, pdb))
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// SetupWithManager watches VMIs, their budgets, and the HyperConverged
// (whose default concerns every VMI).
func (r *BudgetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list v1.VirtualMachineInstanceList
		if err := r.Client.List(ctx, &list); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, v := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&v)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("vmi-disruption-budget").
		For(&v1.VirtualMachineInstance{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&hcov1beta1.HyperConverged{}, all).
		Complete(r)
}
