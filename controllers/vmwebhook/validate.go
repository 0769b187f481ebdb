package vmwebhook

import (
	"errors"
	"strings"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

var vmTree = buildVM()

func buildVM() *vmisubset.Tree {
	t := vmisubset.NewTree(vmSpecFields...)
	t.Graft("template.spec", vmisubset.VMISpec())
	return t
}

// ValidateVMISpec lists the unsupported fields of a VMI spec (as decoded
// from JSON) in one error naming each by its path.
func ValidateVMISpec(spec map[string]any) error { return vmisubset.CheckVMISpec(spec) }

// ValidateVMSpec does the same for a VirtualMachine spec, template included.
func ValidateVMSpec(spec map[string]any) error { return vmisubset.Report(vmTree.Check("spec", spec)) }

// joined is one error of all msgs, or nil.
func joined(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
