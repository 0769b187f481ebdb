package vmwebhook

import (
	"fmt"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// userGuideVM is a VirtualMachine as KubeVirt's user guide writes one.
const userGuideVM = `
spec:
  runStrategy: Halted
  template:
    metadata:
      labels:
        kubevirt.io/size: small
    spec:
      terminationGracePeriodSeconds: 30
      domain:
        cpu:
          cores: 1
        devices:
          disks:
            - name: containerdisk
              disk:
                bus: virtio
            - name: cloudinitdisk
              disk:
                bus: virtio
          interfaces:
            - name: default
              masquerade: {}
        resources:
          requests:
            memory: 64M
      networks:
        - name: default
          pod: {}
      nodeSelector:
        kubernetes.io/hostname: node1
      tolerations:
        - key: x
          operator: Exists
      volumes:
        - name: containerdisk
          containerDisk:
            image: quay.example/containerdisks/cirros:latest
        - name: cloudinitdisk
          cloudInitNoCloud:
            userDataBase64: SGkuXG4=
`

func spec(t *testing.T, manifest string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
		t.Fatal(err)
	}
	return obj["spec"].(map[string]any)
}

func TestSupportedVMPasses(t *testing.T) {
	s := spec(t, userGuideVM)
	if err := ValidateVMSpec(s); err != nil {
		t.Fatalf("user guide VM rejected: %v", err)
	}
	tmpl := s["template"].(map[string]any)["spec"].(map[string]any)
	if err := ValidateVMISpec(tmpl); err != nil {
		t.Fatalf("user guide VMI spec rejected: %v", err)
	}
}

func TestUnsupportedFieldsAreNamed(t *testing.T) {
	for name, tc := range map[string]struct{ from, to, want string }{
		"lun disk": {"              disk:\n                bus: virtio\n            - name: cloudinitdisk", "              lun: {}\n            - name: cloudinitdisk",
			"spec.template.spec.domain.devices.disks[0].lun"},
		"usb bus": {"bus: virtio\n            - name: cloudinitdisk", "bus: usb\n            - name: cloudinitdisk",
			`spec.template.spec.domain.devices.disks[0].disk.bus: "usb" (supported: virtio, sata, scsi)`},
		"sriov interface":        {"masquerade: {}", "sriov: {}", "spec.template.spec.domain.devices.interfaces[0].sriov"},
		"masquerade option":      {"masquerade: {}", "masquerade: {foo: 1}", "spec.template.spec.domain.devices.interfaces[0].masquerade.foo"},
		"gpu":                    {"          interfaces:", "          gpus:\n            - name: g\n              deviceName: nvidia\n          interfaces:", "spec.template.spec.domain.devices.gpus"},
		"instancetype inferred":  {"  runStrategy: Halted", "  runStrategy: Halted\n  instancetype:\n    inferFromVolume: root", "spec.instancetype.inferFromVolume"},
		"instancetype kind":      {"  runStrategy: Halted", "  runStrategy: Halted\n  instancetype:\n    name: u1.small\n    kind: Flavor", `spec.instancetype.kind: "Flavor"`},
		"bad run strategy":       {"runStrategy: Halted", "runStrategy: Sometimes", `spec.runStrategy: "Sometimes" (supported:`},
		"multus default network": {"          pod: {}", "          multus:\n            networkName: n\n            default: true", "spec.template.spec.networks[0].multus.default"},
		"efi":                    {"        cpu:", "        firmware:\n          bootloader:\n            efi: {}\n        cpu:", "spec.template.spec.domain.firmware.bootloader"},
	} {
		s := spec(t, strings.Replace(userGuideVM, tc.from, tc.to, 1))
		err := ValidateVMSpec(s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", name, err, tc.want)
		}
	}
}

func TestAllUnsupportedFieldsListed(t *testing.T) {
	s := spec(t, strings.Replace(strings.Replace(userGuideVM, "masquerade: {}", "sriov: {}", 1), "  runStrategy: Halted", "  runStrategy: Halted\n  preference:\n    name: p\n    inferFromVolume: root", 1))
	err := ValidateVMSpec(s)
	if err == nil || strings.Count(err.Error(), ";") != 1 || !strings.Contains(err.Error(), "spec.preference.inferFromVolume") || !strings.Contains(err.Error(), "sriov") {
		t.Fatalf("err = %v; want both fields named", err)
	}
}

func TestDeletionRefusal(t *testing.T) {
	if err := deletionRefusal("ns/hc", nil); err != nil {
		t.Errorf("no VMs: %v, want allowed", err)
	}
	var many []string
	for i := 7; i > 0; i-- {
		many = append(many, fmt.Sprintf("VirtualMachine ns/vm%d", i))
	}
	for _, tt := range []struct {
		blocking []string
		want     string
	}{
		{[]string{"VirtualMachineInstance b/x", "VirtualMachine a/y"}, "HyperConverged ns/hc cannot be deleted while virtual machines exist: VirtualMachine a/y, VirtualMachineInstance b/x; delete them first"},
		{many, "VirtualMachine ns/vm1, VirtualMachine ns/vm2, VirtualMachine ns/vm3, VirtualMachine ns/vm4, VirtualMachine ns/vm5 and 2 more; delete them first"},
	} {
		err := deletionRefusal("ns/hc", tt.blocking)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("deletionRefusal(%v) = %v, want %q", tt.blocking, err, tt.want)
		}
	}
}
