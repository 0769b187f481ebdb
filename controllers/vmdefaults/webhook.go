package vmdefaults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"
)

// Path is where the Defaulter is served.
const Path = "/mutate-kubevirt-io-v1-defaults"

// Defaulter is the mutating webhook that writes the defaults into new
// VirtualMachineInstances and into the templates of VirtualMachines as
// they are created and changed.
type Defaulter struct{}

// Handle implements admission.Handler.
func (Defaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	var (
		spec any
		path []string
		err  error
	)
	switch {
	case req.Kind.Kind == "VirtualMachineInstance" && req.Operation == admissionv1.Create:
		spec, err = vmiSpec(req.Object.Raw)
		path = []string{"spec"}
	case req.Kind.Kind == "VirtualMachine" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		spec, err = vmTemplateSpec(req.Object.Raw)
		path = []string{"spec", "template", "spec"}
	default:
		return admission.Allowed("")
	}
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	if spec == nil {
		return admission.Allowed("")
	}
	raw, err := replace(req.Object.Raw, path, spec)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// vmiSpec is the defaulted spec of the VMI in raw, with a firmware UUID of
// its own.
func vmiSpec(raw []byte) (any, error) {
	var vmi v1.VirtualMachineInstance
	if err := json.Unmarshal(raw, &vmi); err != nil {
		return nil, err
	}
	VMISpec(&vmi.Spec, types.UID(uuid.NewString()))
	return vmi.Spec, nil
}

// vmTemplateSpec is the defaulted template spec of the VM in raw, or nil
// when it has no template. Only the firmware UUID when the VM names an
// instancetype or a preference: they fill the rest when the VMI is made.
func vmTemplateSpec(raw []byte) (any, error) {
	var vm v1.VirtualMachine
	if err := json.Unmarshal(raw, &vm); err != nil {
		return nil, err
	}
	if vm.Spec.Template == nil {
		return nil, nil
	}
	spec := &vm.Spec.Template.Spec
	var uid types.UID
	if vm.Name != "" {
		uid = FirmwareUUID(vm.Name)
	}
	if vm.Spec.Instancetype != nil || vm.Spec.Preference != nil {
		Firmware(spec, uid)
	} else {
		VMISpec(spec, uid)
	}
	return spec, nil
}

// replace returns the JSON object raw with the value at path replaced by
// v, so that the patch touches nothing outside it.
func replace(raw []byte, path []string, v any) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var val any
	if err := json.Unmarshal(data, &val); err != nil {
		return nil, err
	}
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", k)
		}
		m = next
	}
	m[path[len(path)-1]] = val
	return json.Marshal(obj)
}
