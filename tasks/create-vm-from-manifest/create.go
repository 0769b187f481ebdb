package createvm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v1 "kubevirt.io/api/core/v1"
)

// ManifestHashAnnotation lets a rerun of the same step recognise the VM it
// created (the task is idempotent).
const ManifestHashAnnotation = "tekvirt.io/manifest-sha256"

// Params are the task's params.
type Params struct {
	Manifest          string
	Namespace         string
	RunStrategy       string
	StartVM           string
	SetOwnerReference string
	// DefaultNamespace is the TaskRun's, used when neither the param nor
	// the manifest names one.
	DefaultNamespace string
	// Owner is the step's Pod, the owner when SetOwnerReference is true.
	OwnerName string
	OwnerUID  types.UID
}

// Result names the created VM.
type Result struct {
	Name, Namespace string
	// Existed is set when an identical VM from an earlier run was found.
	Existed bool
}

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"name": r.Name, "namespace": r.Namespace}
}

var runStrategies = map[string]v1.VirtualMachineRunStrategy{
	"Always": v1.RunStrategyAlways, "Halted": v1.RunStrategyHalted, "Manual": v1.RunStrategyManual,
	"RerunOnFailure": v1.RunStrategyRerunOnFailure, "Once": v1.RunStrategyOnce,
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

// Prepare applies the params to vm.
func Prepare(vm *v1.VirtualMachine, p Params) error {
	if ns := p.Namespace; ns != "" {
		vm.Namespace = ns
	}
	if vm.Namespace == "" {
		vm.Namespace = p.DefaultNamespace
	}
	if vm.Namespace == "" {
		return errors.New("no namespace: set param namespace or metadata.namespace")
	}
	switch {
	case p.RunStrategy != "":
		rs, ok := runStrategies[p.RunStrategy]
		if !ok {
			return fmt.Errorf("param runStrategy %q is not one of Always, Halted, Manual, RerunOnFailure, Once", p.RunStrategy)
		}
		vm.Spec.RunStrategy, vm.Spec.Running = &rs, nil
	case p.StartVM != "":
		start, err := strconv.ParseBool(p.StartVM)
		if err != nil {
			return fmt.Errorf("param startVM %q is not true or false", p.StartVM)
		}
		if vm.Spec.RunStrategy != nil && *vm.Spec.RunStrategy == v1.RunStrategyAlways {
			break // KubeVirt's tasks ignore startVM for Always
		}
		rs := v1.RunStrategyHalted
		if start {
			rs = v1.RunStrategyAlways
		}
		vm.Spec.RunStrategy, vm.Spec.Running = &rs, nil
	}
	if own, _ := strconv.ParseBool(p.SetOwnerReference); own {
		if p.OwnerName == "" || p.OwnerUID == "" {
			return errors.New("setOwnerReference is true but the step does not know its Pod (POD_NAME/POD_UID unset)")
		}
		vm.OwnerReferences = append(vm.OwnerReferences, metav1.OwnerReference{
			APIVersion: "v1", Kind: "Pod", Name: p.OwnerName, UID: p.OwnerUID,
		})
	}
	return nil
}

// Run creates the VM, or finds the one an earlier run of the same
// manifest and params created.
func Run(ctx context.Context, c client.Client, p Params) (Result, error) {
	vm, err := Decode(p.Manifest)
	if err != nil {
		return Result{}, err
	}
	if err := Prepare(vm, p); err != nil {
		return Result{}, err
	}
	sum := sha256.Sum256([]byte(p.Manifest + "\x00" + p.Namespace + "\x00" + p.RunStrategy + "\x00" + p.StartVM))
	hash := hex.EncodeToString(sum[:])
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, ManifestHashAnnotation, hash)
	err = c.Create(ctx, vm)
	if apierrors.IsAlreadyExists(err) {
		existing := &v1.VirtualMachine{}
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(vm), existing); gerr == nil && existing.Annotations[ManifestHashAnnotation] == hash {
			return Result{Name: existing.Name, Namespace: existing.Namespace, Existed: true}, nil
		}
		return Result{}, fmt.Errorf("VirtualMachine %s/%s already exists and was not created from this manifest: %w", vm.Namespace, vm.Name, err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("creating VirtualMachine %s/%s: %w", vm.Namespace, nameOf(vm), err)
	}
	return Result{Name: vm.Name, Namespace: vm.Namespace}, nil
}

func nameOf(vm *v1.VirtualMachine) string {
	if vm.Name != "" {
		return vm.Name
	}
	return vm.GenerateName + "*"
}

// ownerFromEnv reads the Pod identity the task passes through the downward API.
func ownerFromEnv(getenv func(string) string) (string, types.UID) {
	return getenv("POD_NAME"), types.UID(getenv("POD_UID"))
}
