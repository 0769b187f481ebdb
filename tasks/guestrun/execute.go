package guestrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
)

// AddressAnnotation is where the node handler running a VMI serves exec.
const AddressAnnotation = guestexec.AddressAnnotation

// Params are the task's params.
type Params struct {
	VMName, VMNamespace string
	Command, Args       []string
	Script              string
	// SecretName, when set, runs over SSH with the connection this secret
	// (in the VM's namespace) describes instead of through the guest agent;
	// NoSecret (kubevirt-tekton-tasks' default) counts as unset.
	SecretName string
	// Timeout bounds waiting for the guest agent plus the run.
	Timeout time.Duration
	// Start starts a VM (its start subresource); nil leaves a VM that is
	// not running alone.
	Start func(ctx context.Context, namespace, name string) error
}

// NoSecret is kubevirt-tekton-tasks' secretName default, meaning none.
const NoSecret = "__empty__"

// Executor runs a request in the guest of vmi through the handler at address.
type Executor interface {
	Exec(ctx context.Context, address string, vmi *v1.VirtualMachineInstance, req guestexec.Request) (*guestexec.Result, error)
}

// ExitError carries the guest command's non-zero exit code out of the step.
type ExitError struct{ Code int }

func (e *ExitError) Error() string {
	return fmt.Sprintf("command in the guest exited with code %d", e.Code)
}

// ExitCode is the code the step exits with.
func (e *ExitError) ExitCode() int { return e.Code }

// BuildRequest turns the params into the program to run: the script via
// /bin/sh -c, else command[0] with the rest of command and args.
func BuildRequest(p Params) (guestexec.Request, error) {
	switch {
	case p.Script != "" && len(p.Command) > 0:
		return guestexec.Request{}, errors.New("params script and command are both set; give one")
	case p.Script != "":
		return guestexec.Request{Command: "/bin/sh", Args: []string{"-c", p.Script}}, nil
	case len(p.Command) > 0 && p.Command[0] != "":
		return guestexec.Request{Command: p.Command[0], Args: append(append([]string{}, p.Command[1:]...), p.Args...)}, nil
	}
	return guestexec.Request{}, errors.New("neither param command nor script is set: nothing to execute")
}

// Run waits for the guest agent of the VM's VMI, runs the program, copies
// its output to stdout and stderr, and returns an *ExitError for a non-zero
// exit code.
func Run(ctx context.Context, c client.Client, ex Executor, p Params, stdout, stderr io.Writer) error {
	if p.VMName == "" {
		return errors.New("param vmName is empty")
	}
	req, err := BuildRequest(p)
	if err != nil {
		return err
	}
	if p.SecretName == NoSecret {
		p.SecretName = ""
	}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	if err := ensureRunning(ctx, c, p, stderr); err != nil {
		return err
	}
	if p.SecretName != "" {
		return runSSH(ctx, c, p, req, stdout, stderr)
	}
	vmi, err := waitForAgent(ctx, c, p)
	if err != nil {
		return err
	}
	addr := vmi.Annotations[AddressAnnotation]
	if addr == "" {
		return fmt.Errorf("VirtualMachineInstance %s/%s has no %s annotation: its node handler does not serve exec", vmi.Namespace, vmi.Name, AddressAnnotation)
	}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutSeconds = max(1, int(time.Until(dl).Seconds()))
	}
	res, err := ex.Exec(ctx, addr, vmi, req)
	if err != nil {
		return fmt.Errorf("executing %s in VirtualMachineInstance %s/%s: %w", req.Command, vmi.Namespace, vmi.Name, err)
	}
	_, _ = stdout.Write(res.Stdout)
	_, _ = stderr.Write(res.Stderr)
	if res.Truncated {
		fmt.Fprintln(stderr, "(output truncated by the guest agent)")
	}
	if res.ExitCode != 0 {
		return &ExitError{Code: res.ExitCode}
	}
	return nil
}

// ensureRunning starts the VM, as kubevirt-tekton-tasks does, when its run
// strategy leaves starting it to the user (Halted, Manual) and its VMI does
// not run. A VMI without a VM is waited for as it is.
func ensureRunning(ctx context.Context, c client.Client, p Params, log io.Writer) error {
	if p.Start == nil {
		return nil
	}
	vm := &v1.VirtualMachine{}
	err := c.Get(ctx, client.ObjectKey{Namespace: p.VMNamespace, Name: p.VMName}, vm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading VirtualMachine %s/%s: %w", p.VMNamespace, p.VMName, err)
	}
	rs, err := vm.RunStrategy()
	if err != nil || (rs != v1.RunStrategyHalted && rs != v1.RunStrategyManual) {
		return nil // the VM controller runs it (or the VM is invalid, which the wait reports)
	}
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vmi); err == nil && !vmi.IsFinal() {
		return nil
	}
	if err := p.Start(ctx, vm.Namespace, vm.Name); err != nil {
		return fmt.Errorf("starting VirtualMachine %s/%s (it was not running): %w", vm.Namespace, vm.Name, err)
	}
	fmt.Fprintf(log, "VirtualMachine %s/%s was not running (%s): started\n", vm.Namespace, vm.Name, rs)
	return nil
}

// waitForAgent polls the VMI until it runs with its guest agent connected.
func waitForAgent(ctx context.Context, c client.Client, p Params) (*v1.VirtualMachineInstance, error) {
	vmi := &v1.VirtualMachineInstance{}
	last := "does not exist"
	for {
		err := c.Get(ctx, client.ObjectKey{Namespace: p.VMNamespace, Name: p.VMName}, vmi)
		switch {
		case err == nil:
			if vmi.Status.Phase == v1.Running && agentConnected(vmi) {
				return vmi, nil
			}
			if vmi.Status.Phase == v1.Succeeded || vmi.Status.Phase == v1.Failed {
				return nil, fmt.Errorf("VirtualMachineInstance %s/%s is %s: it will not run the command", p.VMNamespace, p.VMName, vmi.Status.Phase)
			}
			last = fmt.Sprintf("is %s, guest agent not connected", vmi.Status.Phase)
		case apierrors.IsNotFound(err):
			last = "does not exist (is the VM running?)"
		case ctx.Err() == nil:
			return nil, fmt.Errorf("reading VirtualMachineInstance %s/%s: %w", p.VMNamespace, p.VMName, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out after %s waiting for the guest agent of VirtualMachineInstance %s/%s: it %s; execute-in-vm needs qemu-guest-agent running in the guest", p.Timeout, p.VMNamespace, p.VMName, last)
		case <-time.After(time.Second):
		}
	}
}

func agentConnected(vmi *v1.VirtualMachineInstance) bool {
	for _, c := range vmi.Status.Conditions {
		if c.Type == v1.VirtualMachineInstanceAgentConnected && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
