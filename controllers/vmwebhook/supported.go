package vmwebhook

// vmSpecFields are the VirtualMachine spec fields outside the template's spec.
var vmSpecFields = []string{
	"runStrategy=Always|Halted|Manual|RerunOnFailure|Once", "running",
	"template.metadata.**",
	// Checked as DataVolumes by the webhook.
	"dataVolumeTemplates.**",
}
