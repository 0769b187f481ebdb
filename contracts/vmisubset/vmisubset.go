package vmisubset

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	v1 "kubevirt.io/api/core/v1"
)

// Fields are the VMI spec fields the runtime implements, as dotted
// paths below spec (list elements are transparent: "volumes.name" is the
// name of every volume). "x.**" allows x's whole subtree, "x.*" any key of
// the map x, and "x=a|b" limits the values of x.
var Fields = []string{
	"domain.cpu.cores", "domain.cpu.sockets", "domain.cpu.threads",
	"domain.memory.guest",
	"domain.machine.type=pc",
	"domain.resources.requests.*", "domain.resources.limits.*",
	"domain.devices.autoattachSerialConsole", "domain.devices.autoattachPodInterface",
	"domain.devices.autoattachGraphicsDevice",
	"domain.devices.disks.name", "domain.devices.disks.bootOrder", "domain.devices.disks.serial",
	"domain.devices.disks.cache=none|writethrough|writeback",
	"domain.devices.disks.disk.bus=virtio|sata|scsi", "domain.devices.disks.disk.readonly",
	"domain.devices.disks.cdrom.bus=sata", "domain.devices.disks.cdrom.readonly", "domain.devices.disks.cdrom.tray=closed",
	"domain.devices.interfaces.name", "domain.devices.interfaces.masquerade", "domain.devices.interfaces.bridge",
	"domain.devices.interfaces.model=virtio", "domain.devices.interfaces.macAddress",
	"domain.devices.interfaces.ports.name", "domain.devices.interfaces.ports.port",
	"domain.devices.interfaces.ports.protocol=TCP|UDP",
	"domain.devices.hostDevices.name", "domain.devices.hostDevices.deviceName",
	"domain.firmware.uuid",
	"domain.firmware.kernelBoot.kernelArgs",
	"domain.firmware.kernelBoot.container.image", "domain.firmware.kernelBoot.container.kernelPath",
	"domain.firmware.kernelBoot.container.initrdPath", "domain.firmware.kernelBoot.container.imagePullPolicy",
	"networks.name", "networks.pod", "networks.pod.vmNetworkCIDR", "networks.pod.vmIPv6NetworkCIDR", "networks.multus.networkName",
	"volumes.name",
	"volumes.containerDisk.image", "volumes.containerDisk.path", "volumes.containerDisk.imagePullPolicy",
	"volumes.persistentVolumeClaim.claimName", "volumes.persistentVolumeClaim.readOnly", "volumes.persistentVolumeClaim.hotpluggable",
	"volumes.dataVolume.name", "volumes.dataVolume.hotpluggable",
	"volumes.cloudInitNoCloud.userData", "volumes.cloudInitNoCloud.userDataBase64",
	"volumes.cloudInitNoCloud.networkData", "volumes.cloudInitNoCloud.networkDataBase64",
	"nodeSelector.*", "affinity.**", "tolerations.**", "topologySpreadConstraints.**",
	"evictionStrategy", "terminationGracePeriodSeconds", "hostname", "subdomain",
	"priorityClassName", "schedulerName",
	"architecture=amd64",
	"accessCredentials.sshPublicKey.source.secret.secretName",
	"accessCredentials.sshPublicKey.propagationMethod.qemuGuestAgent.users",
	"accessCredentials.sshPublicKey.propagationMethod.noCloud",
	"accessCredentials.userPassword.source.secret.secretName",
	"accessCredentials.userPassword.propagationMethod.qemuGuestAgent",
}

// VMISpec is the tree of Fields.
func VMISpec() *Tree { return NewTree(Fields...) }

var vmiSpec = VMISpec()

// CheckVMISpec lists the unsupported fields of a VMI spec (as decoded from
// JSON) in one error naming each by its path.
func CheckVMISpec(spec map[string]any) error { return Report(vmiSpec.Check("spec", spec)) }

// Check is CheckVMISpec of a typed VMI spec.
func Check(spec *v1.VirtualMachineInstanceSpec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encoding the VMI spec: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("decoding the VMI spec: %w", err)
	}
	return CheckVMISpec(m)
}

// Report is one error naming every unsupported field of msgs, or nil.
func Report(msgs []string) error {
	if len(msgs) == 0 {
		return nil
	}
	return errors.New("fields not supported by tekvirt: " + strings.Join(msgs, "; "))
}
