package vmwebhook

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	snapshotv1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/vmsnapshot"
)

// virtualMachineSnapshot admits a snapshot of a VM; its spec does not
// change afterwards.
func virtualMachineSnapshot(_ context.Context, req admission.Request) error {
	if req.Operation == admissionv1.Update {
		return specUnchanged(req)
	}
	var s snapshotv1.VirtualMachineSnapshot
	if err := decode(req, &s, nil); err != nil {
		return err
	}
	return vmsnapshot.ValidateSnapshot(&s)
}

// virtualMachineRestore admits a restore tekvirt can do; its spec does
// not change afterwards.
func virtualMachineRestore(_ context.Context, req admission.Request) error {
	if req.Operation == admissionv1.Update {
		return specUnchanged(req)
	}
	var r snapshotv1.VirtualMachineRestore
	if err := decode(req, &r, nil); err != nil {
		return err
	}
	return vmsnapshot.Validate(&r)
}
