package vmcreate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	v1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/tasks/shellwords"
)

// virtctlFlags are what FromVirtctl reads of `virtctl create vm`.
type virtctlFlags struct {
	name, runStrategy, instancetype, preference, memory string
	userData, networkData                               string
	gracePeriod                                         int64
	imports, containerDisks, pvcs                       []string
}

// FromVirtctl makes the VirtualMachine `virtctl create vm` makes from the
// same flags: --name, --run-strategy (Always unless given),
// --termination-grace-period, --instancetype and --preference
// ([kind/]name), --memory, --volume-import (type:ds|pvc|http|registry|blank
// with src, name, size, bootorder), --volume-containerdisk and --volume-pvc
// (src, name, bootorder), --cloud-init-user-data and
// --cloud-init-network-data (base64). Any other flag is an error naming
// it. Each volume gets a virtio disk and the VM the pod network, which
// KubeVirt's webhook would add.
func FromVirtctl(command string) (*v1.VirtualMachine, error) {
	words, err := shellwords.Split(command)
	if err != nil {
		return nil, fmt.Errorf("param virtctl: %w", err)
	}
	if len(words) >= 2 && words[0] == "create" && words[1] == "vm" {
		words = words[2:]
	}
	var f virtctlFlags
	fs := pflag.NewFlagSet("virtctl create vm", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	fs.StringVar(&f.name, "name", "", "")
	fs.StringVar(&f.runStrategy, "run-strategy", string(v1.RunStrategyAlways), "")
	fs.Int64Var(&f.gracePeriod, "termination-grace-period", 180, "")
	fs.StringVar(&f.instancetype, "instancetype", "", "")
	fs.StringVar(&f.preference, "preference", "", "")
	fs.StringVar(&f.memory, "memory", "", "")
	fs.StringArrayVar(&f.imports, "volume-import", nil, "")
	fs.StringArrayVar(&f.containerDisks, "volume-containerdisk", nil, "")
	fs.StringArrayVar(&f.pvcs, "volume-pvc", nil, "")
	fs.StringVar(&f.userData, "cloud-init-user-data", "", "")
	fs.StringVar(&f.networkData, "cloud-init-network-data", "", "")
	if err := fs.Parse(words); err != nil {
		return nil, fmt.Errorf("param virtctl: %w (supported: virtctl create vm flags --name, --run-strategy, --termination-grace-period, --instancetype, --preference, --memory, --volume-import, --volume-containerdisk, --volume-pvc, --cloud-init-user-data, --cloud-init-network-data)", err)
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("param virtctl: unexpected argument %q", fs.Arg(0))
	}
	return f.vm()
}

func (f virtctlFlags) vm() (*v1.VirtualMachine, error) {
	if f.name == "" {
		f.name = "vm-" + rand.String(5)
	}
	rs, ok := runStrategies[f.runStrategy]
	if !ok {
		return nil, fmt.Errorf("param virtctl: --run-strategy %q is not one of Always, Halted, Manual, RerunOnFailure, Once", f.runStrategy)
	}
	vm := &v1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: f.name},
		Spec: v1.VirtualMachineSpec{RunStrategy: &rs, Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
			TerminationGracePeriodSeconds: &f.gracePeriod,
			Networks:                      []v1.Network{{Name: "default", NetworkSource: v1.NetworkSource{Pod: &v1.PodNetwork{}}}},
			Domain: v1.DomainSpec{Devices: v1.Devices{Interfaces: []v1.Interface{
				{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
			}}},
		}}},
	}
	var errs []error
	if f.instancetype != "" {
		kind, name, err := prefixedName("--instancetype", f.instancetype, "virtualmachineinstancetype", "virtualmachineclusterinstancetype")
		errs = append(errs, err)
		vm.Spec.Instancetype = &v1.InstancetypeMatcher{Kind: kind, Name: name}
	}
	if f.preference != "" {
		kind, name, err := prefixedName("--preference", f.preference, "virtualmachinepreference", "virtualmachineclusterpreference")
		errs = append(errs, err)
		vm.Spec.Preference = &v1.PreferenceMatcher{Kind: kind, Name: name}
	}
	if f.memory != "" {
		q, err := resource.ParseQuantity(f.memory)
		if err != nil {
			errs = append(errs, fmt.Errorf("param virtctl: --memory %q is not a quantity", f.memory))
		} else {
			vm.Spec.Template.Spec.Domain.Memory = &v1.Memory{Guest: &q}
		}
	}
	v := volumes{vm: vm, bootOrders: map[uint]bool{}}
	for i, s := range f.containerDisks {
		errs = append(errs, v.containerDisk(i, s))
	}
	for i, s := range f.imports {
		errs = append(errs, v.imported(i, s))
	}
	for i, s := range f.pvcs {
		errs = append(errs, v.pvc(i, s))
	}
	errs = append(errs, v.cloudInit(f.userData, f.networkData))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return vm, nil
}

// prefixedName reads [kind/]name; kind must be one of kinds (lower case,
// as virtctl writes them) and becomes the API kind.
func prefixedName(flag, s, namespaced, cluster string) (string, string, error) {
	kind, name, found := strings.Cut(s, "/")
	if !found {
		return "", s, nil
	}
	switch kind {
	case namespaced:
		return map[string]string{"virtualmachineinstancetype": "VirtualMachineInstancetype", "virtualmachinepreference": "VirtualMachinePreference"}[kind], name, nil
	case cluster:
		return map[string]string{"virtualmachineclusterinstancetype": "VirtualMachineClusterInstancetype", "virtualmachineclusterpreference": "VirtualMachineClusterPreference"}[kind], name, nil
	}
	return "", "", fmt.Errorf("param virtctl: %s kind %q is not %s or %s", flag, kind, namespaced, cluster)
}

// volumes adds the flags' volumes to vm, with a virtio disk each.
type volumes struct {
	vm         *v1.VirtualMachine
	bootOrders map[uint]bool
}

// volumeParams reads key:value,key:value, allowing only the given keys.
func volumeParams(flag, s string, allowed ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, val, ok := strings.Cut(kv, ":")
		if !ok || !contains(allowed, k) {
			return nil, fmt.Errorf("param virtctl: %s %q: %q is not one of %s (key:value, comma-separated)", flag, s, kv, strings.Join(allowed, ", "))
		}
		out[k] = val
	}
	return out, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func (v volumes) add(flag string, vol v1.Volume, bootOrder string) error {
	for _, existing := range v.vm.Spec.Template.Spec.Volumes {
		if existing.Name == vol.Name {
			return fmt.Errorf("param virtctl: %s: there is already a volume named %s", flag, vol.Name)
		}
	}
	disk := v1.Disk{Name: vol.Name, DiskDevice: v1.DiskDevice{Disk: &v1.DiskTarget{Bus: v1.DiskBusVirtio}}}
	if bootOrder != "" {
		n, err := strconv.ParseUint(bootOrder, 10, 32)
		if err != nil || n == 0 || v.bootOrders[uint(n)] {
			return fmt.Errorf("param virtctl: %s bootorder %q is not a whole number above 0 used once", flag, bootOrder)
		}
		v.bootOrders[uint(n)] = true
		o := uint(n)
		disk.BootOrder = &o
	}
	spec := &v.vm.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, vol)
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, disk)
	return nil
}

func (v volumes) containerDisk(i int, s string) error {
	p, err := volumeParams("--volume-containerdisk", s, "src", "name", "bootorder")
	if err != nil {
		return err
	}
	if p["src"] == "" {
		return fmt.Errorf("param virtctl: --volume-containerdisk %q has no src", s)
	}
	name := orDefault(p["name"], fmt.Sprintf("%s-containerdisk-%d", v.vm.Name, i))
	return v.add("--volume-containerdisk", v1.Volume{Name: name, VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: p["src"]}}}, p["bootorder"])
}

func (v volumes) pvc(i int, s string) error {
	p, err := volumeParams("--volume-pvc", s, "src", "name", "bootorder")
	if err != nil {
		return err
	}
	if p["src"] == "" {
		return fmt.Errorf("param virtctl: --volume-pvc %q has no src", s)
	}
	name := orDefault(p["name"], fmt.Sprintf("%s-pvc-%d", v.vm.Name, i))
	return v.add("--volume-pvc", v1.Volume{Name: name, VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
		PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: p["src"]}}}}, p["bootorder"])
}

// imported is a --volume-import: a DataVolume template of the VM.
func (v volumes) imported(i int, s string) error {
	const flag = "--volume-import"
	p, err := volumeParams(flag, s, "type", "src", "name", "size", "bootorder")
	if err != nil {
		return err
	}
	spec := cdiv1.DataVolumeSpec{Storage: &cdiv1.StorageSpec{}}
	if p["size"] != "" {
		q, err := resource.ParseQuantity(p["size"])
		if err != nil {
			return fmt.Errorf("param virtctl: %s %q: size %q is not a quantity", flag, s, p["size"])
		}
		spec.Storage.Resources.Requests = corev1.ResourceList{corev1.ResourceStorage: q}
	}
	ns, name, hasNS := strings.Cut(p["src"], "/")
	if !hasNS {
		ns, name = "", p["src"]
	}
	needsSrc, needsSize := true, false
	switch p["type"] {
	case "ds":
		spec.SourceRef = &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Name: name}
		if ns != "" {
			spec.SourceRef.Namespace = &ns
		}
	case "pvc":
		spec.Source = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: ns, Name: name}}
	case "http":
		spec.Source, needsSize = &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: p["src"]}}, true
	case "registry":
		spec.Source, needsSize = &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{URL: &[]string{p["src"]}[0]}}, true
	case "blank":
		spec.Source, needsSrc, needsSize = &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, false, true
	default:
		return fmt.Errorf("param virtctl: %s %q: type %q is not one of ds, pvc, http, registry, blank", flag, s, p["type"])
	}
	switch {
	case needsSrc && p["src"] == "":
		return fmt.Errorf("param virtctl: %s %q has no src", flag, s)
	case needsSize && p["size"] == "":
		return fmt.Errorf("param virtctl: %s %q: type %s needs a size", flag, s, p["type"])
	}
	volName := orDefault(p["name"], fmt.Sprintf("%s-volume-%d", v.vm.Name, i))
	v.vm.Spec.DataVolumeTemplates = append(v.vm.Spec.DataVolumeTemplates, v1.DataVolumeTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: volName}, Spec: spec})
	return v.add(flag, v1.Volume{Name: volName, VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: volName}}}, p["bootorder"])
}

func (v volumes) cloudInit(userData, networkData string) error {
	if userData == "" && networkData == "" {
		return nil
	}
	src := &v1.CloudInitNoCloudSource{UserDataBase64: userData, NetworkDataBase64: networkData}
	for flag, val := range map[string]string{"--cloud-init-user-data": userData, "--cloud-init-network-data": networkData} {
		if _, err := base64.StdEncoding.DecodeString(val); val != "" && err != nil {
			return fmt.Errorf("param virtctl: %s is not base64: %w", flag, err)
		}
	}
	return v.add("--cloud-init-user-data", v1.Volume{Name: "cloudinitdisk", VolumeSource: v1.VolumeSource{CloudInitNoCloud: src}}, "")
}

func orDefault(v, def string) string {
	if v != "" {
		return v
	}
	return def
}
