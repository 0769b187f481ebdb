package vmwebhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// unsupportedMigrationFields are the migration's fields tekvirt does not
// implement: KubeVirt's decentralized (cross-cluster) migrations and its
// migration priority queue.
var unsupportedMigrationFields = []string{"sendTo", "receive", "priority"}

// virtualMachineInstanceMigration admits a migration as KubeVirt does: it
// names a VMI of its namespace that runs, can migrate (its LiveMigratable
// condition, KubeVirt's words) and has no other migration in flight; its
// spec does not change afterwards.
func (v Validator) virtualMachineInstanceMigration(ctx context.Context, req admission.Request) error {
	if req.Operation == admissionv1.Update {
		return specUnchanged(req)
	}
	var m kubevirtv1.VirtualMachineInstanceMigration
	var spec map[string]any
	if err := decode(req, &m, &spec); err != nil {
		return err
	}
	for _, f := range unsupportedMigrationFields {
		if _, ok := spec[f]; ok {
			return fmt.Errorf("spec.%s is not supported by tekvirt (VirtualMachineInstanceMigration %s/%s)", f, req.Namespace, m.Name)
		}
	}
	if m.Spec.VMIName == "" {
		return fmt.Errorf("spec.vmiName is required: the VirtualMachineInstance to migrate")
	}
	return v.migratable(ctx, req.Namespace, m.Spec.VMIName)
}

// migratable refuses a migration of VMI namespace/name unless it runs,
// can migrate and has no migration in flight.
func (v Validator) migratable(ctx context.Context, namespace, name string) error {
	vmi := &kubevirtv1.VirtualMachineInstance{}
	switch err := v.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, vmi); {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("spec.vmiName: the VMI %q does not exist in namespace %s", name, namespace)
	case err != nil:
		return fmt.Errorf("reading VMI %s/%s: %w", namespace, name, err)
	}
	if vmi.IsFinal() {
		return fmt.Errorf("cannot migrate VMI %s/%s: it has ended (%s)", namespace, name, vmi.Status.Phase)
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstanceIsMigratable && c.Status == corev1.ConditionFalse {
			return fmt.Errorf("Cannot migrate VMI, Reason: %s, Message: %s", c.Reason, c.Message) //nolint:staticcheck // KubeVirt's message, which users and tools match
		}
	}
	list := &kubevirtv1.VirtualMachineInstanceMigrationList{}
	if err := v.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return fmt.Errorf("listing the migrations of namespace %s: %w", namespace, err)
	}
	for _, other := range list.Items {
		if other.Spec.VMIName == name && !other.IsFinal() && other.DeletionTimestamp == nil {
			return fmt.Errorf("VMI %s/%s is migrating already: migration %s is in flight", namespace, name, other.Name)
		}
	}
	return nil
}
