package subresources

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/controllers/frontproxy"
	"github.com/tekvirt/tekvirt/controllers/instancetype"
	"github.com/tekvirt/tekvirt/controllers/vmwebhook"
)

// maxVMBody bounds the VM an expand-vm-spec request sends.
const maxVMBody = 1 << 20

// expandVMSpec serves PUT namespaces/NS/expand-vm-spec: the VM sent, with
// its instancetype and preference applied (and their matchers dropped),
// for callers allowed update on expand-vm-spec.
func (a *API) expandVMSpec(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns := r.PathValue("namespace")
	if err := a.authorize(ctx, "update", "expand-vm-spec", "", ns, ""); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vm, err := decodeVM(r.Body, ns)
	if err == nil {
		vm.Namespace = ns
		vm, err = a.expand(ctx, vm)
	}
	if err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	writeVM(w, vm)
}

// expand applies the instancetype and preference vm names, as they are
// now; a missing one or a conflict is a 422 naming it.
func (a *API) expand(ctx context.Context, vm *v1.VirtualMachine) (*v1.VirtualMachine, error) {
	if vm.Spec.Instancetype == nil && vm.Spec.Preference == nil {
		return vm, nil
	}
	spec, err := instancetype.Resolve(ctx, a.Client, vm)
	if err != nil {
		return nil, apierrors.NewInvalid(v1.VirtualMachineGroupVersionKind.GroupKind(), vm.Name, field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())})
	}
	out := vm.DeepCopy()
	if out.Spec.Template == nil {
		out.Spec.Template = &v1.VirtualMachineInstanceTemplateSpec{}
	}
	out.Spec.Template.Spec = *spec
	out.Spec.Instancetype, out.Spec.Preference = nil, nil
	return out, nil
}

// expandSpec serves GET virtualmachines/NAME/expand-spec: the stored VM
// expanded, for callers allowed get on virtualmachines/expand-spec.
func (a *API) expandSpec(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if err := a.authorize(ctx, "get", "virtualmachines", "expand-spec", ns, name); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vm := &v1.VirtualMachine{}
	if err := a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vm); err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	vm, err := a.expand(ctx, vm)
	if err != nil {
		frontproxy.WriteStatus(w, err)
		return
	}
	writeVM(w, vm)
}

// decodeVM reads a VirtualMachine of namespace ns (or none) whose spec
// tekvirt supports, or answers why not: 400 naming the bad input.
func decodeVM(body io.Reader, ns string) (*v1.VirtualMachine, error) {
	data, err := io.ReadAll(io.LimitReader(body, maxVMBody+1))
	switch {
	case err != nil:
		return nil, apierrors.NewBadRequest("reading the request: " + err.Error())
	case len(data) == 0:
		return nil, apierrors.NewBadRequest("empty request body")
	case len(data) > maxVMBody:
		return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the VirtualMachine is larger than %d bytes", maxVMBody))
	}
	raw := map[string]any{}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Can not unmarshal Request body to struct, error: %v", err))
	}
	spec, _ := raw["spec"].(map[string]any)
	if spec == nil {
		return nil, apierrors.NewBadRequest("Object is not a valid VirtualMachine: spec is missing")
	}
	if err := vmwebhook.ValidateVMSpec(spec); err != nil {
		return nil, apierrors.NewBadRequest("Object is not a valid VirtualMachine: " + err.Error())
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	vm := &v1.VirtualMachine{}
	if err := dec.Decode(vm); err != nil {
		return nil, apierrors.NewBadRequest("Object is not a valid VirtualMachine: " + err.Error())
	}
	if vm.Namespace != "" && vm.Namespace != ns {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("VM namespace must be empty or %s", ns))
	}
	return vm, nil
}

func writeVM(w http.ResponseWriter, vm *v1.VirtualMachine) {
	vm.SetGroupVersionKind(v1.VirtualMachineGroupVersionKind)
	frontproxy.WriteJSON(w, http.StatusOK, vm)
}
