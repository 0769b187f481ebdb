package domain

import (
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func ptr[T any](v T) *T { return &v }

// cirros is a VMI as KubeVirt's examples write one: a container disk, a
// cloud-init disk and a masquerade interface.
func cirros() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "testvmi", UID: "5e3a1c8e-0d7b-4f53-9b1e-6a9f3f1d2c11"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64M")}},
				Devices: v1.Devices{
					Disks: []v1.Disk{
						{Name: "containerdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
						{Name: "cloudinitdisk", DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}},
					},
					Interfaces: []v1.Interface{{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}}},
				},
			},
			Networks: []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Volumes: []v1.Volume{
				{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "127.0.0.1:5000/tekvirt/guest:latest"}}},
				{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: &v1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}}},
			},
		},
	}
}

func cirrosOptions() Options {
	return Options{
		Volumes: map[string]Volume{
			"containerdisk": {Path: "/run/tekvirt/vmi/uid/containerdisk.qcow2", Format: "qcow2"},
			"cloudinitdisk": {Path: "/run/tekvirt/vmi/uid/cloudinit.img", Format: "raw", ReadOnly: true},
		},
		AgentSocket:  "/run/tekvirt/vmi/uid/agent.sock",
		SerialSocket: "/run/tekvirt/vmi/uid/serial.sock",
		SerialLog:    "/run/tekvirt/vmi/uid/serial.log",
		Interfaces: map[string]Interface{"default": {
			Tap: "tap0", MAC: "52:54:00:5e:3a:1c",
			Address: netip.MustParsePrefix("10.0.2.2/24"), Gateway: netip.MustParseAddr("10.0.2.1"),
		}},
	}
}

// kernelBoot is a KVM guest booted from a kernel in a container, with a
// PVC disk, a CPU topology, guest memory and no serial console.
func kernelBoot() (*v1.VirtualMachineInstance, Options) {
	vmi := &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "worker-0", UID: "9b0c7a52-3f1e-4d8a-a6c2-2e5d8f7b1c03"},
		Spec: v1.VirtualMachineInstanceSpec{
			Domain: v1.DomainSpec{
				CPU:    &v1.CPU{Sockets: 2, Cores: 2},
				Memory: &v1.Memory{Guest: ptr(resource.MustParse("1Gi"))},
				Firmware: &v1.Firmware{KernelBoot: &v1.KernelBoot{
					KernelArgs: "console=ttyS0 root=/dev/vda",
					Container:  &v1.KernelBootContainer{Image: "127.0.0.1:5000/tekvirt/kernel:latest", KernelPath: "/boot/vmlinux", InitrdPath: "/boot/initrd.gz"},
				}},
				Devices: v1.Devices{
					AutoattachSerialConsole: ptr(false),
					AutoattachPodInterface:  ptr(false),
					Disks: []v1.Disk{{Name: "root", BootOrder: ptr(uint(1)), Cache: v1.CacheNone,
						DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{}}}},
				},
			},
			Volumes: []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "root"}},
			}}},
		},
	}
	return vmi, Options{
		KVM:     true,
		Volumes: map[string]Volume{"root": {Path: "/var/lib/pv/pvc-1/disk.img", Format: "raw", FDGroup: "volume-0"}},
		Kernel:  "/run/tekvirt/vmi/uid-2/vmlinux", Initrd: "/run/tekvirt/vmi/uid-2/initrd.gz",
		AgentSocket: "/run/tekvirt/vmi/uid-2/agent.sock",
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".xml")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Fatalf("%s differs from the golden file (go test -update rewrites it)\n--- got\n%s", path, got)
	}
}

func TestConvertGolden(t *testing.T) {
	kvmi, kopts := kernelBoot()
	hvmi, hopts := hostDevices()
	cases := []struct {
		name string
		vmi  *v1.VirtualMachineInstance
		opts Options
	}{
		{"containerdisk-tcg", cirros(), cirrosOptions()},
		{"kernelboot-pvc-kvm", kvmi, kopts},
		{"hostdevices-kvm", hvmi, hopts},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Convert(tc.vmi, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			xml, err := d.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name, xml+"\n")
		})
	}
}

// TestConvertNamesUnsupportedFields checks that what the runtime cannot
// express is an error naming the field, never dropped.
func TestConvertNamesUnsupportedFields(t *testing.T) {
	tests := []struct {
		name string
		mut  func(*v1.VirtualMachineInstance, *Options)
		want []string
	}{
		{"no memory", func(v *v1.VirtualMachineInstance, _ *Options) { v.Spec.Domain.Resources.Requests = nil },
			[]string{"spec.domain.memory.guest or spec.domain.resources.requests.memory"}},
		{"unsupported volume source", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Volumes[1].VolumeSource = v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{}}
		}, []string{"spec.volumes[1].configMap", `"cloudinitdisk"`}},
		{"disk without volume", func(v *v1.VirtualMachineInstance, _ *Options) { v.Spec.Domain.Devices.Disks[0].Name = "nope" },
			[]string{`spec.domain.devices.disks[0]: no volume named "nope"`, `spec.volumes[0] "containerdisk" has no disk`}},
		{"volume not prepared", func(_ *v1.VirtualMachineInstance, o *Options) { delete(o.Volumes, "cloudinitdisk") },
			[]string{`spec.domain.devices.disks[1]: volume "cloudinitdisk" was not prepared`}},
		{"lun", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Devices.Disks[0].DiskDevice = v1.DiskDevice{LUN: &v1.LunTarget{}}
		}, []string{"spec.domain.devices.disks[0].lun"}},
		{"usb bus", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Devices.Disks[0].Disk.Bus = v1.DiskBusUSB
		},
			[]string{`spec.domain.devices.disks[0]: bus "usb"`}},
		{"disk io and tag", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Devices.Disks[1].IO = v1.IONative
			v.Spec.Domain.Devices.Disks[1].Tag = "x"
		}, []string{"spec.domain.devices.disks[1].io", "spec.domain.devices.disks[1].tag"}},
		{"sriov binding", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Devices.Interfaces[0].InterfaceBindingMethod = v1.InterfaceBindingMethod{SRIOV: &v1.InterfaceSRIOV{}}
		}, []string{"spec.domain.devices.interfaces[0] (default)"}},
		{"e1000 model", func(v *v1.VirtualMachineInstance, _ *Options) { v.Spec.Domain.Devices.Interfaces[0].Model = "e1000" },
			[]string{`spec.domain.devices.interfaces[0] (default): model "e1000"`}},
		{"interface not prepared", func(_ *v1.VirtualMachineInstance, o *Options) { o.Interfaces = nil },
			[]string{"spec.domain.devices.interfaces[0] (default): the node prepared no tap for it"}},
		{"efi", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Firmware = &v1.Firmware{Bootloader: &v1.Bootloader{EFI: &v1.EFI{}}}
		}, []string{"spec.domain.firmware.bootloader.efi"}},
		// Fields no configurator reads are named by the supported subset
		// (contracts/vmisubset), not dropped.
		{"a field outside the subset", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.DNSPolicy = "None"
			v.Spec.Domain.Clock = &v1.Clock{ClockOffset: v1.ClockOffset{UTC: &v1.ClockOffsetUTC{}}}
		}, []string{"fields not supported by tekvirt", "spec.dnsPolicy", "spec.domain.clock"}},
		{"kernel not extracted", func(v *v1.VirtualMachineInstance, _ *Options) {
			v.Spec.Domain.Firmware = &v1.Firmware{KernelBoot: &v1.KernelBoot{Container: &v1.KernelBootContainer{Image: "img", KernelPath: "/k"}}}
		}, []string{"kernel /k of img was not extracted"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vmi, opts := cirros(), cirrosOptions()
			tt.mut(vmi, &opts)
			_, err := Convert(vmi, opts)
			if err == nil {
				t.Fatal("converted without error")
			}
			for _, w := range append(tt.want, "VMI default/testvmi") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestDefaultPodInterface: a VMI that names no interface and no network
// gets one on the pod network, as KubeVirt's defaulting gives it, unless
// autoattachPodInterface is false.
func TestDefaultPodInterface(t *testing.T) {
	for _, tc := range []struct {
		name string
		auto *bool
		nics int
	}{{"unset", nil, 1}, {"true", ptr(true), 1}, {"false", ptr(false), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := cirros()
			vmi.Spec.Domain.Devices.Interfaces, vmi.Spec.Networks = nil, nil
			vmi.Spec.Domain.Devices.AutoattachPodInterface = tc.auto
			d, err := Convert(vmi, cirrosOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got := len(d.Devices.Interfaces); got != tc.nics {
				t.Fatalf("%d interfaces, want %d", got, tc.nics)
			}
			if tc.nics == 1 {
				nic := d.Devices.Interfaces[0]
				if nic.Source.Ethernet == nil || nic.Target.Dev != "tap0" || nic.Target.Managed != "no" || nic.MAC.Address != "52:54:00:5e:3a:1c" || nic.Alias.Name != "ua-default" {
					t.Errorf("interface %+v, want the handler's tap0 for the interface named default", nic)
				}
			}
		})
	}
}

// TestGraphics: a VMI gets a VGA display with a VNC server on the
// socket only (no network listener), as KubeVirt attaches one by default,
// unless autoattachGraphicsDevice is false.
func TestGraphics(t *testing.T) {
	for _, tc := range []struct {
		name     string
		auto     *bool
		graphics int
	}{{"unset", nil, 1}, {"true", ptr(true), 1}, {"false", ptr(false), 0}} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := cirros()
			vmi.Spec.Domain.Devices.AutoattachGraphicsDevice = tc.auto
			opts := cirrosOptions()
			opts.VNCSocket = "/run/tekvirt/vmi/uid/vnc.sock"
			d, err := Convert(vmi, opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Devices.Graphics) != tc.graphics || len(d.Devices.Videos) != tc.graphics {
				t.Fatalf("%d graphics and %d videos, want %d", len(d.Devices.Graphics), len(d.Devices.Videos), tc.graphics)
			}
			if tc.graphics == 0 {
				return
			}
			vnc := d.Devices.Graphics[0].VNC
			if vnc == nil || len(vnc.Listeners) != 1 || vnc.Listeners[0].Socket == nil || vnc.Listeners[0].Socket.Socket != opts.VNCSocket ||
				vnc.Port != 0 || vnc.Listen != "" || vnc.AutoPort != "" {
				t.Errorf("graphics %+v, want VNC on %s only", d.Devices.Graphics[0], opts.VNCSocket)
			}
			if v := d.Devices.Videos[0].Model; v.Type != "vga" || v.VRam != 16384 {
				t.Errorf("video %+v, want vga with 16 MiB", v)
			}
		})
	}
}
