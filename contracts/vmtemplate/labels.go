package vmtemplate

// Labels of a VM made from a template.
const (
	// TemplateLabel and TemplateNamespaceLabel name the template.
	TemplateLabel          = "vm.kubevirt.io/template"
	TemplateNamespaceLabel = "vm.kubevirt.io/template.namespace"
	// VMNameLabel, on the VMI template, names the VM.
	VMNameLabel = "vm.kubevirt.io/name"
)

// Annotations that carry validation rules: a VM's own (copied from its
// template's VM object when it was made), else its template's (the older
// place).
const (
	VMValidationsAnnotation       = "vm.kubevirt.io/validations"
	TemplateValidationsAnnotation = "validations"
)

// Label prefixes that classify a template (os.template.kubevirt.io/fedora:
// "true"), copied to the VMs made from it, and the annotation prefix of an
// OS's display name.
const (
	OSLabelPrefix          = "os.template.kubevirt.io/"
	WorkloadLabelPrefix    = "workload.template.kubevirt.io/"
	FlavorLabelPrefix      = "flavor.template.kubevirt.io/"
	OSNameAnnotationPrefix = "name.os.template.kubevirt.io/"
	// TypeLabel is "base" on a common template, "vm" on a user's.
	TypeLabel = "template.kubevirt.io/type"
)
