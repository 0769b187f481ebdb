package vmdefaults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/google/uuid"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/macpool"
	"github.com/tekvirt/tekvirt/controllers/requester"
)

// Defaulter is the mutating webhook that writes the defaults into new
// VirtualMachineInstances and into VirtualMachines as they are created
// and changed: their inferred instancetype and preference, and their
// template's defaults.
type Defaulter struct {
	// Reader reads the volumes an instancetype or preference is inferred
	// from.
	Reader client.Reader
	// Client asks the API server whether the requester may read the
	// volumes of another namespace (SubjectAccessReviews).
	Client client.Client
	// MACs, when set, gives the template's interfaces MACs from the MAC
	// pool, after the defaults (the pod network's interface among them).
	MACs *macpool.Pool
}

// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get
// +kubebuilder:rbac:groups=cdi.kubevirt.io,resources=datavolumes;datasources,verbs=get

// Handle implements admission.Handler.
func (d Defaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	var (
		fields map[string]any
		err    error
	)
	switch {
	case req.Kind.Kind == "VirtualMachineInstance" && req.Operation == admissionv1.Create:
		fields, err = vmiFields(req.Object.Raw)
	case req.Kind.Kind == "VirtualMachine" && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update):
		fields, err = d.vmFields(ctx, req.Object.Raw, req.OldObject.Raw, func(ctx context.Context, ns string) error {
			return requester.MayClone(ctx, d.Client, req.UserInfo, ns)
		})
	default:
		return admission.Allowed("")
	}
	var bad decodeError
	switch {
	case errors.As(err, &bad):
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	case err != nil:
		return admission.Denied(err.Error())
	case fields == nil:
		return admission.Allowed("")
	}
	raw, err := replace(req.Object.Raw, fields)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, raw)
}

// decodeError marks an object that cannot be decoded: a bad request.
type decodeError struct{ error }

// vmiFields are the defaulted fields of the VMI in raw (its spec, with a
// firmware UUID of its own), by their dotted path.
func vmiFields(raw []byte) (map[string]any, error) {
	var vmi v1.VirtualMachineInstance
	if err := json.Unmarshal(raw, &vmi); err != nil {
		return nil, decodeError{err}
	}
	VMISpec(&vmi.Spec, types.UID(uuid.NewString()))
	return map[string]any{"spec": vmi.Spec}, nil
}

// vmFields are the defaulted fields of the VM in raw (its matchers, its
// template's spec), or nil when it has no template. Only the firmware
// UUID when the VM names an instancetype or a preference: they fill the
// rest when the VMI is made.
func (d Defaulter) vmFields(ctx context.Context, raw, oldRaw []byte, mayRead func(context.Context, string) error) (map[string]any, error) {
	var vm v1.VirtualMachine
	if err := json.Unmarshal(raw, &vm); err != nil {
		return nil, decodeError{err}
	}
	// On update, the MACs the VM has already are its own, whatever the
	// pool noted when it was admitted (without its name, when generateName
	// named it: the API server names an object after admission).
	var own []string
	if len(oldRaw) > 0 {
		var old v1.VirtualMachine
		if err := json.Unmarshal(oldRaw, &old); err != nil {
			return nil, decodeError{err}
		}
		if old.Spec.Template != nil {
			for _, iface := range old.Spec.Template.Spec.Domain.Devices.Interfaces {
				own = append(own, iface.MacAddress)
			}
		}
	}
	if vm.Spec.Template == nil {
		return nil, nil
	}
	if err := Infer(ctx, d.Reader, &vm, mayRead); err != nil {
		return nil, fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
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
	if d.MACs != nil {
		if err := d.MACs.Assign(ctx, &vm, spec, own...); err != nil {
			return nil, fmt.Errorf("VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
		}
	}
	return map[string]any{"spec.template.spec": spec, "spec.instancetype": vm.Spec.Instancetype, "spec.preference": vm.Spec.Preference}, nil
}

// replace returns the JSON object raw with the value at each dotted path
// of fields replaced (removed when nil), so that the patch touches nothing
// else.
func replace(raw []byte, fields map[string]any) ([]byte, error) {
	var obj map[string]any
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	for path, v := range fields {
		keys := strings.Split(path, ".")
		m := obj
		for _, k := range keys[:len(keys)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s is not an object", k)
			}
			m = next
		}
		last := keys[len(keys)-1]
		if rv := reflect.ValueOf(v); v == nil || rv.Kind() == reflect.Pointer && rv.IsNil() {
			delete(m, last)
			continue
		}
		data, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		var val any
		if err := json.Unmarshal(data, &val); err != nil {
			return nil, err
		}
		m[last] = val
	}
	return json.Marshal(obj)
}
