package createvm

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/tasks/vmcreate"
)

// Params are the task's params: exactly one of Manifest and Virtctl.
type Params struct {
	Manifest string
	// Virtctl holds `virtctl create vm` flags.
	Virtctl string
	vmcreate.Options
}

// Decode parses a VirtualMachine manifest (YAML or JSON), rejecting fields
// the kubevirt.io/v1 API does not have.
func Decode(manifest string) (*v1.VirtualMachine, error) {
	if manifest == "" {
		return nil, errors.New("param manifest is empty: give a VirtualMachine manifest")
	}
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		return nil, fmt.Errorf("manifest is not YAML or JSON: %w", err)
	}
	var vm v1.VirtualMachine
	// With validation the converter names unknown fields by their path.
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj, &vm, true); err != nil {
		return nil, fmt.Errorf("manifest is not a valid kubevirt.io/v1 VirtualMachine: %w", err)
	}
	if vm.Kind != "VirtualMachine" || vm.APIVersion != v1.GroupVersion.String() {
		return nil, fmt.Errorf("manifest is a %s %q, want kind VirtualMachine, apiVersion %s", vm.Kind, vm.APIVersion, v1.GroupVersion)
	}
	if vm.Name == "" && vm.GenerateName == "" {
		return nil, errors.New("manifest has neither metadata.name nor metadata.generateName")
	}
	return &vm, nil
}

// Run creates the VM, or finds the one an earlier run of the same
// manifest and params created, and starts it when startVM says so.
func Run(ctx context.Context, c client.Client, start vmcreate.Starter, p Params) (vmcreate.Result, error) {
	var vm *v1.VirtualMachine
	var err error
	switch {
	case p.Manifest != "" && p.Virtctl != "":
		return vmcreate.Result{}, errors.New("params manifest and virtctl are both set; give one")
	case p.Virtctl != "":
		vm, err = vmcreate.FromVirtctl(p.Virtctl)
	case p.Manifest == "":
		return vmcreate.Result{}, errors.New("params manifest and virtctl are both empty: give a VirtualMachine manifest or virtctl create vm flags")
	default:
		vm, err = Decode(p.Manifest)
	}
	if err != nil {
		return vmcreate.Result{}, err
	}
	if err := p.Apply(vm); err != nil {
		return vmcreate.Result{}, err
	}
	id := vmcreate.Identity(p.Manifest, p.Namespace, p.RunStrategy, p.StartVM, p.Virtctl)
	return vmcreate.Create(ctx, c, start, p.Options, vm, id)
}
