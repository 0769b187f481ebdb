package vm

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes,verbs=get;list;watch;create
// The VM's creator was checked for clone permission at admission; the
// controller creates the template's DataVolume with its own, as KubeVirt's does.
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes/source,verbs=create

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
				ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: t.Name, Labels: t.Labels, Annotations: t.Annotations},
				Spec:       *t.Spec.DeepCopy(),
			}
			if err := controllerutil.SetControllerReference(vm, dv, r.Client.Scheme()); err != nil {
				return "", "", err
			}
			if err := r.Client.Create(ctx, dv); err != nil {
				return "", "", fmt.Errorf("creating DataVolume %s of %s: %w", t.Name, klog.KObj(vm), err)
			}
			waiting = v1.VirtualMachineStatusProvisioning
			continue
		}
		if err != nil {
			return "", "", err
		}
		switch dv.Status.Phase {
		case cdiv1.Succeeded:
		case cdiv1.Failed:
			return v1.VirtualMachineStatusDataVolumeError, fmt.Sprintf("DataVolume %s failed: %s", dv.Name, datavolume.ReadyMessage(dv)), nil
		default:
			waiting = v1.VirtualMachineStatusProvisioning
		}
	}
	return waiting, "", nil
}
