package instancetype

import (
	"encoding/json"
	"fmt"

	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/tekvirt/tekvirt/contracts/vmisubset"
)

// InstancetypeFields are the instancetype spec fields tekvirt implements.
var InstancetypeFields = []string{
	"cpu.guest", "memory.guest",
	"nodeSelector.*", "schedulerName",
	"hostDevices.name", "hostDevices.deviceName",
	"annotations.*",
}

// PreferenceFields are the preference spec fields tekvirt implements.
var PreferenceFields = []string{
	"cpu.preferredCPUTopology=sockets|cores|threads|spread|any|preferSockets|preferCores|preferThreads|preferSpread|preferAny",
	"cpu.spreadOptions.across=SocketsCoresThreads|SocketsCores|CoresThreads", "cpu.spreadOptions.ratio",
	"devices.preferredDiskBus=virtio|sata", "devices.preferredCdromBus=sata",
	"devices.preferredInterfaceModel=virtio", "devices.preferredInterfaceMasquerade",
	"devices.preferredDiskCache=none|writethrough|writeback",
	"devices.preferredAutoattachGraphicsDevice", "devices.preferredAutoattachPodInterface",
	"devices.preferredAutoattachSerialConsole",
	"preferredTerminationGracePeriodSeconds", "preferredSubdomain", "preferredArchitecture=amd64",
	"requirements.cpu.guest", "requirements.memory.guest", "requirements.architecture=amd64",
	"annotations.*",
}

var (
	instancetypeTree = vmisubset.NewTree(InstancetypeFields...)
	preferenceTree   = vmisubset.NewTree(PreferenceFields...)
)

// CheckInstancetype names every field of spec tekvirt does not implement.
func CheckInstancetype(kind, name string, spec *instancetypev1beta1.VirtualMachineInstancetypeSpec) error {
	return check(instancetypeTree, kind, name, spec)
}

// CheckPreference names every field of spec tekvirt does not implement.
func CheckPreference(kind, name string, spec *instancetypev1beta1.VirtualMachinePreferenceSpec) error {
	return check(preferenceTree, kind, name, spec)
}

func check(tree *vmisubset.Tree, kind, name string, spec any) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return err
	}
	if err := vmisubset.Report(tree.Check("spec", m)); err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	return nil
}
