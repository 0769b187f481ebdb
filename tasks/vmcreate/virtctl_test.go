package vmcreate

import (
	"encoding/base64"
	"reflect"
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestFromVirtctl(t *testing.T) {
	userData := base64.StdEncoding.EncodeToString([]byte("#cloud-config\nhostname: vm1\n"))
	vm, err := FromVirtctl("create vm --name vm1 --instancetype u1.small --preference virtualmachinepreference/mine --run-strategy Halted " +
		"--volume-import type:ds,src:tekvirt-os-images/guest,size:1Gi,bootorder:1 --volume-import type:blank,size:64Mi,name:scratch " +
		"--volume-containerdisk src:127.0.0.1:5000/tools:latest --cloud-init-user-data " + userData)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "vm1" || *vm.Spec.RunStrategy != v1.RunStrategyHalted || *vm.Spec.Template.Spec.TerminationGracePeriodSeconds != 180 {
		t.Errorf("VM %s run strategy %s grace %d", vm.Name, *vm.Spec.RunStrategy, *vm.Spec.Template.Spec.TerminationGracePeriodSeconds)
	}
	if it := vm.Spec.Instancetype; it == nil || it.Name != "u1.small" || it.Kind != "" {
		t.Errorf("instancetype %+v", it)
	}
	if p := vm.Spec.Preference; p == nil || p.Name != "mine" || p.Kind != "VirtualMachinePreference" {
		t.Errorf("preference %+v", p)
	}
	dvts := vm.Spec.DataVolumeTemplates
	if len(dvts) != 2 || dvts[0].Name != "vm1-volume-0" || dvts[0].Spec.SourceRef.Name != "guest" || *dvts[0].Spec.SourceRef.Namespace != "tekvirt-os-images" ||
		dvts[0].Spec.Storage.Resources.Requests.Storage().String() != "1Gi" || dvts[1].Name != "scratch" || dvts[1].Spec.Source.Blank == nil {
		t.Errorf("DataVolume templates %+v", dvts)
	}
	var names []string
	for _, v := range vm.Spec.Template.Spec.Volumes {
		names = append(names, v.Name)
	}
	if want := []string{"vm1-containerdisk-0", "vm1-volume-0", "scratch", "cloudinitdisk"}; !reflect.DeepEqual(names, want) {
		t.Errorf("volumes %v, want %v", names, want)
	}
	disks := vm.Spec.Template.Spec.Domain.Devices.Disks
	if len(disks) != 4 || disks[1].BootOrder == nil || *disks[1].BootOrder != 1 || disks[0].Disk.Bus != v1.DiskBusVirtio {
		t.Errorf("disks %+v", disks)
	}
	if ci := vm.Spec.Template.Spec.Volumes[3].CloudInitNoCloud; ci == nil || ci.UserDataBase64 != userData {
		t.Errorf("cloud-init %+v", ci)
	}
	if vm, err := FromVirtctl("--memory 256Mi"); err != nil || !strings.HasPrefix(vm.Name, "vm-") || vm.Spec.Template.Spec.Domain.Memory.Guest.String() != "256Mi" || *vm.Spec.RunStrategy != v1.RunStrategyAlways {
		t.Errorf("defaults: %+v, %v", vm, err)
	}
}

func TestFromVirtctlBadInput(t *testing.T) {
	for name, tc := range map[string]struct{ cmd, want string }{
		"unknown flag":       {"--name x --volume-datasource src:a", "unknown flag: --volume-datasource"},
		"stray argument":     {"--name x extra", `unexpected argument "extra"`},
		"bad run strategy":   {"--run-strategy Sometimes", `--run-strategy "Sometimes"`},
		"bad kind":           {"--instancetype virtualmachinepreference/x", `--instancetype kind "virtualmachinepreference"`},
		"unknown import key": {"--volume-import type:ds,src:a,colour:red", `"colour:red" is not one of type, src, name, size, bootorder`},
		"unknown type":       {"--volume-import type:nfs,src:a", `type "nfs" is not one of ds, pvc, http, registry, blank`},
		"http without size":  {"--volume-import type:http,src:http://h/x.img", "type http needs a size"},
		"no src":             {"--volume-containerdisk name:x", "has no src"},
		"duplicate volume":   {"--volume-containerdisk src:a,name:d --volume-pvc src:p,name:d", "there is already a volume named d"},
		"boot order twice":   {"--volume-containerdisk src:a,bootorder:1 --volume-pvc src:p,bootorder:1", `bootorder "1"`},
		"user data":          {"--cloud-init-user-data %%%", "--cloud-init-user-data is not base64"},
		"open quote":         {"--name 'x", "unterminated quote"},
	} {
		if _, err := FromVirtctl(tc.cmd); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}
