package domain

import (
	"reflect"
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

// hostDevices is the kernel-boot worker given two GPUs of one resource and
// an FPGA of another, as a NodePool with hostDevices makes it, with the
// addresses their device plugins put in the launcher's environment.
func hostDevices() (*v1.VirtualMachineInstance, Options) {
	vmi, opts := kernelBoot()
	vmi.Spec.Domain.Devices.HostDevices = []v1.HostDevice{
		{Name: "hostdevice-1", DeviceName: "nvidia.com/A100"},
		{Name: "hostdevice-2", DeviceName: "nvidia.com/A100"},
		{Name: "hostdevice-3", DeviceName: "example.com/fpga"},
	}
	env := map[string]string{
		"PCI_RESOURCE_NVIDIA_COM_A100":  "0000:81:00.0,0000:c1:00.1",
		"PCI_RESOURCE_EXAMPLE_COM_FPGA": " 0001:3b:1f.7 ",
	}
	opts.PCIDevices = PCIDevicesFromEnv(vmi, func(k string) string { return env[k] })
	return vmi, opts
}

func TestPCIResourceEnv(t *testing.T) {
	for in, want := range map[string]string{
		"nvidia.com/A100":                "PCI_RESOURCE_NVIDIA_COM_A100",
		"nvidia.com/GP102GL_Tesla_P40":   "PCI_RESOURCE_NVIDIA_COM_GP102GL_TESLA_P40",
		"intel.com/qat.dh895xcc-vf":      "PCI_RESOURCE_INTEL_COM_QAT_DH895XCC-VF",
		"devices.example.org/sub/device": "PCI_RESOURCE_DEVICES_EXAMPLE_ORG_SUB_DEVICE",
	} {
		if got := PCIResourceEnv(in); got != want {
			t.Errorf("PCIResourceEnv(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPCIDevicesFromEnv(t *testing.T) {
	vmi, opts := hostDevices()
	want := map[string][]string{
		"nvidia.com/A100":  {"0000:81:00.0", "0000:c1:00.1"},
		"example.com/fpga": {"0001:3b:1f.7"},
	}
	if !reflect.DeepEqual(opts.PCIDevices, want) {
		t.Fatalf("PCIDevices = %v, want %v", opts.PCIDevices, want)
	}
	if got := PCIDevicesFromEnv(vmi, func(string) string { return "" }); len(got) != 0 {
		t.Fatalf("no variables set gave %v", got)
	}
}

// TestHostDevicesNamesWhatIsMissing: a host device the launcher was given
// no (or no valid) address for fails the domain, naming the device, the
// resource and the variable.
func TestHostDevicesNamesWhatIsMissing(t *testing.T) {
	tests := []struct {
		name string
		pci  map[string][]string
		want []string
	}{
		{"no device plugin", nil, []string{
			"spec.domain.devices.hostDevices[0] (hostdevice-1): no PCI device of nvidia.com/A100 left for it: 0 allocated to the launcher (PCI_RESOURCE_NVIDIA_COM_A100)",
			"spec.domain.devices.hostDevices[2] (hostdevice-3): no PCI device of example.com/fpga",
		}},
		{"fewer allocated than asked", map[string][]string{"nvidia.com/A100": {"0000:81:00.0"}, "example.com/fpga": {"0000:01:00.0"}},
			[]string{"spec.domain.devices.hostDevices[1] (hostdevice-2): no PCI device of nvidia.com/A100 left for it: 1 allocated"}},
		{"bad address", map[string][]string{"nvidia.com/A100": {"0000:81:00.0", "81:00.0"}, "example.com/fpga": {"0000:01:20.8"}},
			[]string{`hostDevices[1] (hostdevice-2): PCI_RESOURCE_NVIDIA_COM_A100: PCI address "81:00.0" is not domain:bus:slot.function`,
				`hostDevices[2] (hostdevice-3): PCI_RESOURCE_EXAMPLE_COM_FPGA: PCI address "0000:01:20.8"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi, opts := hostDevices()
			opts.PCIDevices = tt.pci
			_, err := Convert(vmi, opts)
			if err == nil {
				t.Fatal("converted without error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
