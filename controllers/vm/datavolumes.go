package vm

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/conditions"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create

// ensureDataVolumes creates the VM's dataVolumeTemplates that do not exist
// and says what holds the start back: Provisioning while any imports,
// DataVolumeError (with the message) when one failed, "" when all succeeded.
func (r *Reconciler) ensureDataVolumes(ctx context.Context, vm *v1.VirtualMachine) (v1.VirtualMachinePrintableStatus, string, error) {
	var waiting v1.VirtualMachinePrintableStatus
	for _, t := range vm.Spec.DataVolumeTemplates {
		dv := &cdiv1.DataVolume{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: t.Name}, dv)
		if apierrors.IsNotFound(err) {
			dv = &cdiv1.DataVolume{
				ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: t.Name, Labels: t.Labels, Annotations: maps.Clone(t.Annotations)},
				Spec:       *t.Spec.DeepCopy(),
			}
			// The DataVolume clones as whoever asked for the VM's templates
			// (the requester webhook keeps the controller's record), never
			// as a record a user wrote into a template.
			delete(dv.Annotations, requester.Annotation)
			if who, ok := vm.Annotations[requester.Annotation]; ok {
				metav1.SetMetaDataAnnotation(&dv.ObjectMeta, requester.Annotation, who)
			}
			if err := controllerutil.SetControllerReference(vm, dv, r.Client.Scheme()); err != nil {
				return "", "", err
			}
			if err := r.Client.Create(ctx, dv); err != nil {
				return "", "", fmt.Errorf("creating DataVolume %s of %s: %w", t.Name, klog.KObj(vm), err)
			}
			r.event(vm, corev1.EventTypeNormal, "SuccessfulDataVolumeCreate", "Created DataVolume %s", dv.Name)
			waiting = v1.VirtualMachineStatusProvisioning
			continue
		}
		if err != nil {
			return "", "", err
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
		case cdiv1.Failed:
			return v1.VirtualMachineStatusDataVolumeError, fmt.Sprintf("DataVolume %s failed: %s", dv.Name, conditions.ReadyMessage(dv)), nil
		default:
			waiting = v1.VirtualMachineStatusProvisioning
		}
	}
	return waiting, "", nil
}
