package vmwebhook

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// maxNamed caps how many blocking objects a refusal names.
const maxNamed = 5

// hyperConvergedDelete refuses deleting the HyperConverged while
// VirtualMachines or VirtualMachineInstances exist, as HCO's webhook does:
// deleting it removes the runtime they run on.
func (v Validator) hyperConvergedDelete(ctx context.Context, req admission.Request) error {
	// Past the cache: a VM created a moment ago must block the deletion too.
	var r client.Reader = v.Client
	if v.Reader != nil {
		r = v.Reader
	}
	var vms kubevirtv1.VirtualMachineList
	if err := r.List(ctx, &vms); err != nil {
		return fmt.Errorf("listing VirtualMachines: %w", err)
	}
	var vmis kubevirtv1.VirtualMachineInstanceList
	if err := r.List(ctx, &vmis); err != nil {
		return fmt.Errorf("listing VirtualMachineInstances: %w", err)
	}
	var blocking []string
	for _, vm := range vms.Items {
		blocking = append(blocking, "VirtualMachine "+vm.Namespace+"/"+vm.Name)
	}
	for _, vmi := range vmis.Items {
		blocking = append(blocking, "VirtualMachineInstance "+vmi.Namespace+"/"+vmi.Name)
	}
	return deletionRefusal(req.Namespace+"/"+req.Name, blocking)
}

// deletionRefusal is the error refusing to delete the HyperConverged named
// hc while blocking objects exist, naming the first few; nil when none do.
func deletionRefusal(hc string, blocking []string) error {
	if len(blocking) == 0 {
		return nil
	}
	sort.Strings(blocking)
	named := blocking
	more := ""
	if len(named) > maxNamed {
		named, more = named[:maxNamed], fmt.Sprintf(" and %d more", len(blocking)-maxNamed)
	}
	return fmt.Errorf("HyperConverged %s cannot be deleted while virtual machines exist: %s%s; delete them first",
		hc, strings.Join(named, ", "), more)
}
