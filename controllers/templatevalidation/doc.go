// Package templatevalidation evaluates the validation rules of KubeVirt's
// common templates (the `vm.kubevirt.io/validations` annotation, JSON
// rules "integer", "string", "regex" and "enum" over JSONPaths of the VM's
// template) as SSP's virt-template-validator does: a violated rule refuses
// the VM with the rule's message, one marked justWarning only warns.
package templatevalidation
