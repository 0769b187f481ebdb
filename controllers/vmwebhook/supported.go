package vmwebhook

// vmiSpecFields are the VMI spec fields the runtime implements, as dotted
// paths below spec (list elements are transparent: "volumes.name" is the
// name of every volume). "x.**" allows x's whole subtree, "x.*" any key of
// the map x, and "x=a|b" limits the values of x.
var vmiSpecFields = []string{
	"domain.cpu.cores", "domain.cpu.sockets", "domain.cpu.threads",
	"domain.memory.guest",
	"domain.resources.requests.*", "domain.resources.limits.*",
	"domain.devices.autoattachSerialConsole",
	"domain.devices.disks.name", "domain.devices.disks.bootOrder", "domain.devices.disks.serial",
	"domain.devices.disks.cache=none|writethrough|writeback",
	"domain.devices.disks.disk.bus=virtio|sata", "domain.devices.disks.disk.readonly",
	"domain.devices.disks.cdrom.bus=sata", "domain.devices.disks.cdrom.readonly",
	"domain.devices.interfaces.name", "domain.devices.interfaces.masquerade", "domain.devices.interfaces.bridge",
	"domain.devices.interfaces.model=virtio",
	"domain.firmware.uuid",
	"domain.firmware.kernelBoot.kernelArgs",
	"domain.firmware.kernelBoot.container.image", "domain.firmware.kernelBoot.container.kernelPath",
	"domain.firmware.kernelBoot.container.initrdPath", "domain.firmware.kernelBoot.container.imagePullPolicy",
	"networks.name", "networks.pod",
	"volumes.name",
	"volumes.containerDisk.image", "volumes.containerDisk.path", "volumes.containerDisk.imagePullPolicy",
	"volumes.persistentVolumeClaim.claimName", "volumes.persistentVolumeClaim.readOnly",
	"volumes.dataVolume.name",
	"volumes.cloudInitNoCloud.userData", "volumes.cloudInitNoCloud.userDataBase64",
	"volumes.cloudInitNoCloud.networkData", "volumes.cloudInitNoCloud.networkDataBase64",
	"nodeSelector.*", "affinity.**", "tolerations.**", "topologySpreadConstraints.**",
	"evictionStrategy", "terminationGracePeriodSeconds", "hostname", "subdomain",
	"architecture=amd64",
}

// vmSpecFields are the VirtualMachine spec fields outside the template's spec.
var vmSpecFields = []string{
	"runStrategy=Always|Halted|Manual|RerunOnFailure|Once", "running",
	"template.metadata.**",
	// Checked as DataVolumes by the webhook.
	"dataVolumeTemplates.**",
}
