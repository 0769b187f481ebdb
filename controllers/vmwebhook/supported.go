package vmwebhook

// vmSpecFields are the VirtualMachine spec fields outside the template's spec.
var vmSpecFields = []string{
	"runStrategy=Always|Halted|Manual|RerunOnFailure|Once", "running",
	"template.metadata.**",
	// Expanded by the VM controller (controllers/instancetype), checked
	// against the named objects by the webhook.
	"instancetype.name", "instancetype.kind=VirtualMachineInstancetype|VirtualMachineClusterInstancetype", "instancetype.revisionName",
	"preference.name", "preference.kind=VirtualMachinePreference|VirtualMachineClusterPreference", "preference.revisionName",
	// Checked as DataVolumes by the webhook.
	"dataVolumeTemplates.**",
}
