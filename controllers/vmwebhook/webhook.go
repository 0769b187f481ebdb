package vmwebhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/datavolume"
)

// Path is where the webhook is served.
const Path = "/validate-kubevirt-io-v1"

// Validator admits VirtualMachines, VirtualMachineInstances and
// DataVolumes whose spec uses only supported fields.
type Validator struct{}

// Handle implements admission.Handler.
func (Validator) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		return admission.Allowed("")
	}
	var obj struct {
		Spec map[string]any `json:"spec"`
	}
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	var err error
	switch req.Kind.Kind {
	case "VirtualMachine":
		err = ValidateVMSpec(obj.Spec)
	case "DataVolume":
		var dv cdiv1.DataVolume
		if err := json.Unmarshal(req.Object.Raw, &dv); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the DataVolume: %w", err))
		}
		err = datavolume.Supported(&dv)
	case "VirtualMachineInstance":
		if req.Operation != admissionv1.Create {
			// The node handler updates running VMIs; their spec was
			// checked when they were created.
			return admission.Allowed("")
		}
		err = ValidateVMISpec(obj.Spec)
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Denied(err.Error())
	}
	return admission.Allowed("")
}
