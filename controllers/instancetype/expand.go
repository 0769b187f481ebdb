package instancetype

import (
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

// specField prefixes the VMI spec fields conflicts are named by, as the
// VM's user wrote them.
const specField = "spec.template.spec."

// Apply expands it (may be nil) and pref (may be nil) into spec, the VM's
// VMI spec. A field both the VM and its instancetype set, or a preference
// requirement the VM does not meet, is an error naming each; spec is then
// left partly changed, so callers apply to a copy.
func Apply(spec *v1.VirtualMachineInstanceSpec, it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) error {
	if it != nil {
		if conflicts := conflicts(spec, it); len(conflicts) > 0 {
			return fmt.Errorf("VM fields %s conflict with the selected instancetype", strings.Join(conflicts, ", "))
		}
		applyInstancetype(spec, it, pref)
	}
	if pref == nil {
		return nil
	}
	if err := requirements(spec, pref); err != nil {
		return err
	}
	applyPreference(spec, pref)
	return nil
}

// conflicts are the fields the VM sets that it sets too.
func conflicts(spec *v1.VirtualMachineInstanceSpec, it *instancetypev1beta1.VirtualMachineInstancetypeSpec) []string {
	var out []string
	d := spec.Domain
	if d.CPU != nil && (d.CPU.Sockets != 0 || d.CPU.Cores != 0 || d.CPU.Threads != 0) {
		out = append(out, specField+"domain.cpu")
	}
	if d.Memory != nil && d.Memory.Guest != nil {
		out = append(out, specField+"domain.memory.guest")
	}
	for _, kind := range []struct {
		name string
		list corev1.ResourceList
	}{{"requests", d.Resources.Requests}, {"limits", d.Resources.Limits}} {
		for _, r := range []string{"cpu", "memory"} {
			if _, ok := kind.list[corev1.ResourceName(r)]; ok {
				out = append(out, fmt.Sprintf("%sdomain.resources.%s.%s", specField, kind.name, r))
			}
		}
	}
	for _, both := range []struct {
		field string
		set   bool
	}{
		{"nodeSelector", len(it.NodeSelector) > 0 && len(spec.NodeSelector) > 0},
		{"schedulerName", it.SchedulerName != "" && spec.SchedulerName != ""},
		{"domain.devices.hostDevices", len(it.HostDevices) > 0 && len(d.Devices.HostDevices) > 0},
	} {
		if both.set {
			out = append(out, specField+both.field)
		}
	}
	return out
}

func applyInstancetype(spec *v1.VirtualMachineInstanceSpec, it *instancetypev1beta1.VirtualMachineInstancetypeSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	sockets, cores, threads := topology(it.CPU.Guest, pref)
	spec.Domain.CPU = &v1.CPU{Sockets: sockets, Cores: cores, Threads: threads}
	spec.Domain.Memory = &v1.Memory{Guest: ptr.To(it.Memory.Guest.DeepCopy())}
	if len(it.NodeSelector) > 0 {
		spec.NodeSelector = it.NodeSelector
	}
	if it.SchedulerName != "" {
		spec.SchedulerName = it.SchedulerName
	}
	if len(it.HostDevices) > 0 {
		spec.Domain.Devices.HostDevices = append([]v1.HostDevice(nil), it.HostDevices...)
	}
}

// topology lays guest vCPUs out as the preference asks; without one, as
// sockets (KubeVirt's default).
func topology(guest uint32, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	t := instancetypev1beta1.Sockets
	if pref != nil && pref.CPU != nil && pref.CPU.PreferredCPUTopology != nil {
		t = *pref.CPU.PreferredCPUTopology
	}
	switch t {
	case instancetypev1beta1.Cores, instancetypev1beta1.DeprecatedPreferCores:
		return 1, guest, 1
	case instancetypev1beta1.Threads, instancetypev1beta1.DeprecatedPreferThreads:
		return 1, 1, guest
	case instancetypev1beta1.Spread, instancetypev1beta1.DeprecatedPreferSpread:
		return spread(guest, pref)
	}
	return guest, 1, 1
}

// spread: ratio (default 2) cores per socket across sockets and cores,
// or also 2 threads per core; sockets alone where guest does not divide.
func spread(guest uint32, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) (sockets, cores, threads uint32) {
	ratio, across := uint32(2), instancetypev1beta1.SpreadAcrossSocketsCores
	if o := pref.CPU.SpreadOptions; o != nil {
		if o.Ratio != nil && *o.Ratio > 0 {
			ratio = *o.Ratio
		}
		if o.Across != nil {
			across = *o.Across
		}
	}
	switch across {
	case instancetypev1beta1.SpreadAcrossSocketsCoresThreads:
		if guest%(2*ratio) == 0 {
			return guest / (2 * ratio), ratio, 2
		}
	case instancetypev1beta1.SpreadAcrossCoresThreads:
		if guest%2 == 0 {
			return 1, guest / 2, 2
		}
	default:
		if guest%ratio == 0 {
			return guest / ratio, ratio, 1
		}
	}
	return guest, 1, 1
}

// requirements checks the preference's minimum vCPUs and memory against
// what the VM ends up with.
func requirements(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) error {
	req := pref.Requirements
	if req == nil {
		return nil
	}
	var errs []error
	if req.CPU != nil {
		if n := vcpus(spec); n < req.CPU.Guest {
			errs = append(errs, fmt.Errorf("the preference requires %d vCPUs, the VM has %d", req.CPU.Guest, n))
		}
	}
	if req.Memory != nil {
		mem := guestMemory(spec)
		if mem == nil || mem.Cmp(req.Memory.Guest) < 0 {
			have := "none"
			if mem != nil {
				have = mem.String()
			}
			errs = append(errs, fmt.Errorf("the preference requires %s of guest memory, the VM has %s", req.Memory.Guest.String(), have))
		}
	}
	return errors.Join(errs...)
}

func vcpus(spec *v1.VirtualMachineInstanceSpec) uint32 {
	c := spec.Domain.CPU
	if c == nil {
		return 1
	}
	return max(c.Sockets, 1) * max(c.Cores, 1) * max(c.Threads, 1)
}

func guestMemory(spec *v1.VirtualMachineInstanceSpec) *resource.Quantity {
	if m := spec.Domain.Memory; m != nil && m.Guest != nil {
		return m.Guest
	}
	if q, ok := spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return &q
	}
	return nil
}

// applyPreference fills in what the VM leaves unset.
func applyPreference(spec *v1.VirtualMachineInstanceSpec, pref *instancetypev1beta1.VirtualMachinePreferenceSpec) {
	if d := pref.Devices; d != nil {
		applyDevicePreferences(&spec.Domain.Devices, d)
	}
	setIfNil(&spec.TerminationGracePeriodSeconds, pref.PreferredTerminationGracePeriodSeconds)
	if spec.Subdomain == "" && pref.PreferredSubdomain != nil {
		spec.Subdomain = *pref.PreferredSubdomain
	}
	if spec.Architecture == "" && pref.PreferredArchitecture != nil {
		spec.Architecture = *pref.PreferredArchitecture
	}
}

func setIfNil[T any](field **T, preferred *T) {
	if *field == nil && preferred != nil {
		v := *preferred
		*field = &v
	}
}

func applyDevicePreferences(dev *v1.Devices, d *instancetypev1beta1.DevicePreferences) {
	for i := range dev.Disks {
		disk := &dev.Disks[i]
		// A disk without a device is a disk, as KubeVirt's admission would
		// make it: the preferred bus applies to it.
		v1.SetDefaults_DiskDevice(&disk.DiskDevice)
		switch {
		case disk.Disk != nil && disk.Disk.Bus == "" && d.PreferredDiskBus != "":
			disk.Disk.Bus = d.PreferredDiskBus
		case disk.CDRom != nil && disk.CDRom.Bus == "" && d.PreferredCdromBus != "":
			disk.CDRom.Bus = d.PreferredCdromBus
		}
		if disk.Cache == "" {
			disk.Cache = d.PreferredDiskCache
		}
	}
	for i := range dev.Interfaces {
		if iface := &dev.Interfaces[i]; iface.Model == "" {
			iface.Model = d.PreferredInterfaceModel
		}
	}
	setIfNil(&dev.AutoattachGraphicsDevice, d.PreferredAutoattachGraphicsDevice)
	setIfNil(&dev.AutoattachPodInterface, d.PreferredAutoattachPodInterface)
	setIfNil(&dev.AutoattachSerialConsole, d.PreferredAutoattachSerialConsole)
}
