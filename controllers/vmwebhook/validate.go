package vmwebhook

import (
	"errors"
	"strings"
)

var (
	vmiTree = build("", vmiSpecFields)
	vmTree  = buildVM()
)

func build(prefix string, patterns []string) *fieldTree {
	t := newTree()
	for _, p := range patterns {
		t.add(prefix + p)
	}
	return t
}

func buildVM() *fieldTree {
	t := build("", vmSpecFields)
	t.graft("template.spec", vmiTree)
	return t
}

// ValidateVMISpec lists the unsupported fields of a VMI spec (as decoded
// from JSON) in one error naming each by its path.
func ValidateVMISpec(spec map[string]any) error { return report(vmiTree.check("spec", spec)) }

// ValidateVMSpec does the same for a VirtualMachine spec, template included.
func ValidateVMSpec(spec map[string]any) error { return report(vmTree.check("spec", spec)) }

func report(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New("fields not supported by tekvirt: " + strings.Join(msgs, "; "))
}

// joined is one error of all msgs, or nil.
func joined(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}
