package vmcreate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
)

// IdentityAnnotation lets a rerun of the same step recognise the VM it
// created (the tasks are idempotent): a hash of what the step was given.
const IdentityAnnotation = "tekvirt.io/manifest-sha256"

// Options are the params every VM-creating task has.
type Options struct {
	Namespace         string
	RunStrategy       string
	StartVM           string
	SetOwnerReference string
	// DefaultNamespace is the TaskRun's, used when neither the param nor
	// the VM names one.
	DefaultNamespace string
	// Owner is the step's Pod, the owner when SetOwnerReference is true.
	Owner metav1.OwnerReference
}

// Result names the created VM.
type Result struct {
	Name, Namespace string
	// Existed is set when the VM an earlier run created was found.
	Existed bool
	// Started is set when the step asked for the VM to start.
	Started bool
}

// Map is the task's results.
func (r Result) Map() map[string]string {
	return map[string]string{"name": r.Name, "namespace": r.Namespace}
}

var runStrategies = map[string]v1.VirtualMachineRunStrategy{
	"Always": v1.RunStrategyAlways, "Halted": v1.RunStrategyHalted, "Manual": v1.RunStrategyManual,
	"RerunOnFailure": v1.RunStrategyRerunOnFailure, "Once": v1.RunStrategyOnce,
}

// Apply places vm in its namespace (the param's, else its own, else the
// TaskRun's), sets the param runStrategy (dropping spec.running) and the
// owner reference; startVM is checked here and acted on after creation.
func (o Options) Apply(vm *v1.VirtualMachine) error {
	if ns := o.Namespace; ns != "" {
		vm.Namespace = ns
	}
	if vm.Namespace == "" {
		vm.Namespace = o.DefaultNamespace
	}
	if vm.Namespace == "" {
		return errors.New("no namespace: set the namespace param or the VM's metadata.namespace")
	}
	if o.RunStrategy != "" {
		rs, ok := runStrategies[o.RunStrategy]
		if !ok {
			return fmt.Errorf("param runStrategy %q is not one of Always, Halted, Manual, RerunOnFailure, Once", o.RunStrategy)
		}
		vm.Spec.RunStrategy, vm.Spec.Running = &rs, nil
	}
	if _, err := o.startRequested(); err != nil {
		return err
	}
	if own, err := strconv.ParseBool(o.SetOwnerReference); err != nil {
		return fmt.Errorf("param setOwnerReference %q is not true or false", o.SetOwnerReference)
	} else if own {
		if o.Owner.Name == "" || o.Owner.UID == "" {
			return errors.New("setOwnerReference is true but the step does not know its Pod (POD_NAME/POD_UID unset)")
		}
		vm.OwnerReferences = append(vm.OwnerReferences, o.Owner)
	}
	return nil
}

func (o Options) startRequested() (bool, error) {
	if o.StartVM == "" {
		return false, nil
	}
	start, err := strconv.ParseBool(o.StartVM)
	if err != nil {
		return false, fmt.Errorf("param startVM %q is not true or false", o.StartVM)
	}
	return start, nil
}

// ShouldStart is whether startVM asks to start vm once it exists: as
// kubevirt-tekton-tasks, true starts it (as `virtctl start`) unless it
// runs Always already; false, or no value, leaves its run strategy alone.
func (o Options) ShouldStart(vm *v1.VirtualMachine) bool {
	start, err := o.startRequested()
	if err != nil || !start {
		return false
	}
	if rs := vm.Spec.RunStrategy; rs != nil && *rs == v1.RunStrategyAlways {
		return false
	}
	return vm.Spec.Running == nil || !*vm.Spec.Running
}

// Identity is the hash of what a step was given, for IdentityAnnotation.
func Identity(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(sum[:])
}

// Starter starts a VM as its start subresource does.
type Starter func(ctx context.Context, namespace, name string) error

// Create creates vm marked with identity, or finds the VM an earlier run
// with the same identity created; a VM of that name made otherwise is an
// error. With startVM true it then starts the VM.
func Create(ctx context.Context, c client.Client, start Starter, o Options, vm *v1.VirtualMachine, identity string) (Result, error) {
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, IdentityAnnotation, identity)
	var res Result
	err := c.Create(ctx, vm)
	switch {
	case apierrors.IsAlreadyExists(err):
		existing := &v1.VirtualMachine{}
		if gerr := c.Get(ctx, client.ObjectKeyFromObject(vm), existing); gerr != nil || existing.Annotations[IdentityAnnotation] != identity {
			return Result{}, fmt.Errorf("VirtualMachine %s/%s already exists and was not created by this step with these params: %w", vm.Namespace, vm.Name, err)
		}
		vm, res.Existed = existing, true
	case err != nil:
		return Result{}, fmt.Errorf("creating VirtualMachine %s/%s: %w", vm.Namespace, nameOf(vm), err)
	}
	res.Name, res.Namespace = vm.Name, vm.Namespace
	if o.ShouldStart(vm) {
		if err := start(ctx, vm.Namespace, vm.Name); err != nil {
			return res, fmt.Errorf("starting VirtualMachine %s/%s: %w", vm.Namespace, vm.Name, err)
		}
		res.Started = true
	}
	return res, nil
}

func nameOf(vm *v1.VirtualMachine) string {
	if vm.Name != "" {
		return vm.Name
	}
	return vm.GenerateName + "*"
}

// Report prints what Create did, for the step's log.
func Report(w io.Writer, res Result) {
	verb := "created"
	if res.Existed {
		verb = "already created by an earlier run"
	}
	fmt.Fprintf(w, "VirtualMachine %s/%s %s\n", res.Namespace, res.Name, verb)
	if res.Started {
		fmt.Fprintf(w, "VirtualMachine %s/%s started\n", res.Namespace, res.Name)
	}
}
