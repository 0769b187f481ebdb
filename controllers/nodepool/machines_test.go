package nodepool

import (
	"reflect"
	"strings"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/controllers/hostpath"
)

func pool(rv *hyperv1.KubevirtRootVolume, compute *hyperv1.KubevirtCompute) *hyperv1.NodePool {
	return &hyperv1.NodePool{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "workers"},
		Spec: hyperv1.NodePoolSpec{ClusterName: "demo", Platform: hyperv1.NodePoolPlatform{Type: hyperv1.KubevirtPlatform,
			Kubevirt: &hyperv1.KubevirtNodePoolPlatform{RootVolume: rv, Compute: compute, NodeSelector: map[string]string{"zone": "a"}}}}}
}

func TestVirtualMachine(t *testing.T) {
	mem := resource.MustParse("1Gi")
	size := resource.MustParse("5Gi")
	rv := &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Type: hyperv1.KubevirtVolumeTypePersistent,
		Persistent: &hyperv1.KubevirtPersistentVolume{Size: &size, StorageClass: ptr.To("fast"),
			AccessModes: []hyperv1.PersistentVolumeAccessMode{hyperv1.PersistentVolumeAccessMode(corev1.ReadWriteOnce)}}}}
	np := pool(rv, &hyperv1.KubevirtCompute{Memory: &mem, Cores: ptr.To(uint32(3))})
	vm := VirtualMachine(np, "workers-abcde", Spec{Namespace: "clusters-demo", Image: "reg/worker@sha256:1", UserData: "#!/bin/sh\n"})

	if vm.Namespace != "clusters-demo" || vm.Labels[PoolLabel] != "workers" || vm.Labels[PoolNamespaceLabel] != "clusters" {
		t.Errorf("VM %s/%s labels %v", vm.Namespace, vm.Name, vm.Labels)
	}
	spec := vm.Spec.Template.Spec
	if spec.Domain.CPU.Cores != 3 || !spec.Domain.Resources.Requests.Memory().Equal(mem) || spec.Domain.Resources.Limits != nil {
		t.Errorf("compute: cores %d, resources %+v", spec.Domain.CPU.Cores, spec.Domain.Resources)
	}
	if spec.EvictionStrategy == nil || *spec.EvictionStrategy != kubevirtv1.EvictionStrategyExternal {
		t.Errorf("evictionStrategy %v, want External (the NodePool decides)", spec.EvictionStrategy)
	}
	if spec.NodeSelector["zone"] != "a" {
		t.Errorf("nodeSelector %v", spec.NodeSelector)
	}
	if ifs := spec.Domain.Devices.Interfaces; len(ifs) != 1 || ifs[0].Bridge == nil || len(spec.Networks) != 1 || spec.Networks[0].Pod == nil {
		t.Errorf("interfaces %+v networks %+v, want the bridge binding on the pod network", ifs, spec.Networks)
	}
	if _, ok := vm.Spec.Template.ObjectMeta.Annotations[kubevirtv1.AllowPodBridgeNetworkLiveMigrationAnnotation]; !ok {
		t.Errorf("template annotations %v: the bridged worker cannot migrate", vm.Spec.Template.ObjectMeta.Annotations)
	}
	if tsc := spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].TopologyKey != corev1.LabelHostname ||
		tsc[0].WhenUnsatisfiable != corev1.ScheduleAnyway || tsc[0].LabelSelector.MatchLabels[PoolLabel] != "workers" {
		t.Errorf("topology spread %+v", tsc)
	}
	if spec.Volumes[1].CloudInitNoCloud == nil || spec.Volumes[1].CloudInitNoCloud.UserData != "#!/bin/sh\n" {
		t.Errorf("cloud-init volume %+v", spec.Volumes[1])
	}
	dvt := vm.Spec.DataVolumeTemplates
	if len(dvt) != 1 || dvt[0].Name != "workers-abcde-rootdisk" || spec.Volumes[0].DataVolume.Name != dvt[0].Name {
		t.Fatalf("root volume %+v / %+v", dvt, spec.Volumes[0])
	}
	st := dvt[0].Spec.Storage
	if !st.Resources.Requests.Storage().Equal(size) || *st.StorageClassName != "fast" || st.AccessModes[0] != corev1.ReadWriteOnce {
		t.Errorf("root storage %+v", st)
	}
	reg := dvt[0].Spec.Source.Registry
	if reg == nil || *reg.URL != "docker://reg/worker@sha256:1" || *reg.PullMethod != cdiv1.RegistryPullNode {
		t.Errorf("root source %+v, want the image pulled by the node", dvt[0].Spec.Source)
	}

	cached := VirtualMachine(np, "workers-fghij", Spec{Namespace: "clusters-demo", Image: "reg/worker@sha256:1", Cache: "workers-boot-cache-1"})
	if src := cached.Spec.DataVolumeTemplates[0].Spec.Source; src.PVC == nil || src.PVC.Name != "workers-boot-cache-1" || src.PVC.Namespace != "clusters-demo" {
		t.Errorf("cached root source %+v, want a clone of the cache", src)
	}
}

func TestVirtualMachineDefaultsAndGuaranteed(t *testing.T) {
	vm := VirtualMachine(pool(nil, nil), "w", Spec{Namespace: "ns", Image: "i"})
	spec := vm.Spec.Template.Spec
	if spec.Domain.CPU.Cores != 2 || !spec.Domain.Resources.Requests.Memory().Equal(resource.MustParse("8Gi")) ||
		!vm.Spec.DataVolumeTemplates[0].Spec.Storage.Resources.Requests.Storage().Equal(resource.MustParse("32Gi")) {
		t.Errorf("defaults: cores %d memory %v root %v", spec.Domain.CPU.Cores, spec.Domain.Resources.Requests.Memory(),
			vm.Spec.DataVolumeTemplates[0].Spec.Storage.Resources.Requests.Storage())
	}
	qos := hyperv1.QoSClassGuaranteed
	g := VirtualMachine(pool(nil, &hyperv1.KubevirtCompute{QosClass: &qos}), "w", Spec{Namespace: "ns", Image: "i"})
	res := g.Spec.Template.Spec.Domain.Resources
	if !res.Limits.Cpu().Equal(resource.MustParse("2")) || !res.Limits.Memory().Equal(resource.MustParse("8Gi")) || !res.Requests.Cpu().Equal(resource.MustParse("2")) {
		t.Errorf("Guaranteed: %+v", res)
	}
}

func TestImageAndCache(t *testing.T) {
	np := pool(nil, nil)
	if Image(np, "default") != "default" || UsesCache(np) {
		t.Error("a pool without rootVolume boots the default image without cache")
	}
	own := "reg/own:1"
	np = pool(&hyperv1.KubevirtRootVolume{Image: &hyperv1.KubevirtDiskImage{ContainerDiskImage: &own},
		CacheStrategy: &hyperv1.KubevirtCachingStrategy{Type: hyperv1.KubevirtCachingStrategyPVC}}, nil)
	if Image(np, "default") != own || !UsesCache(np) {
		t.Error("the pool's own image and cache strategy are ignored")
	}
	if CacheName(np, "a") == CacheName(np, "b") {
		t.Error("a new image must get a new cache")
	}
	if dv := CacheDataVolume(np, "cp", own); dv.Namespace != "cp" || dv.Labels[PoolLabel] != "workers" || *dv.Spec.Source.Registry.PullMethod != cdiv1.RegistryPullNode {
		t.Errorf("cache DataVolume %+v", dv)
	}
}

// TestHostDevices: each of count devices of each kind is a VMI host device
// (so an extended-resource request of the launcher), named apart across
// kinds; a count under 1 or too many devices are refused.
func TestHostDevices(t *testing.T) {
	np := pool(nil, nil)
	np.Spec.Platform.Kubevirt.KubevirtHostDevices = []hyperv1.KubevirtHostDevice{{DeviceName: "nvidia.com/A100", Count: 2}, {DeviceName: "example.com/fpga", Count: 1}}
	got := VirtualMachine(np, "w", Spec{Namespace: "ns", Image: "i"}).Spec.Template.Spec.Domain.Devices.HostDevices
	want := []kubevirtv1.HostDevice{{Name: "hostdevice-1", DeviceName: "nvidia.com/A100"}, {Name: "hostdevice-2", DeviceName: "nvidia.com/A100"},
		{Name: "hostdevice-3", DeviceName: "example.com/fpga"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hostDevices %+v, want %+v", got, want)
	}
	if p := hostDevicesProblem(np.Spec.Platform.Kubevirt.KubevirtHostDevices); p != "" {
		t.Errorf("valid devices refused: %s", p)
	}
	for _, tc := range []struct {
		kinds []hyperv1.KubevirtHostDevice
		want  string
	}{
		{[]hyperv1.KubevirtHostDevice{{DeviceName: "a", Count: 1}, {DeviceName: "b", Count: 0}}, "hostDevices[1] (b): count 0 is less than 1"},
		{[]hyperv1.KubevirtHostDevice{{DeviceName: "a", Count: 20}, {DeviceName: "b", Count: 13}}, "more than 32 devices per worker"},
		{[]hyperv1.KubevirtHostDevice{{DeviceName: "a", Count: 1 << 30}, {DeviceName: "b", Count: 1 << 30}}, "more than 32 devices per worker"},
	} {
		if p := hostDevicesProblem(tc.kinds); !strings.Contains(p, tc.want) {
			t.Errorf("hostDevicesProblem(%+v) = %q, want %q", tc.kinds, p, tc.want)
		}
	}
}

// TestWorkerEvictionStrategy: a worker whose root volume is shared and
// that has no host devices takes the infrastructure's eviction strategy
// (a drain with LiveMigrate migrates it); any other is External.
func TestWorkerEvictionStrategy(t *testing.T) {
	shared := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-shared"}, Provisioner: hostpath.Provisioner,
		Parameters: map[string]string{hostpath.ParamShared: "true"}}
	local := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-hostpath"}, Provisioner: hostpath.Provisioner}
	withModes := func(modes ...corev1.PersistentVolumeAccessMode) *hyperv1.KubevirtRootVolume {
		p := &hyperv1.KubevirtPersistentVolume{}
		for _, m := range modes {
			p.AccessModes = append(p.AccessModes, hyperv1.PersistentVolumeAccessMode(m))
		}
		return &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Type: hyperv1.KubevirtVolumeTypePersistent, Persistent: p}}
	}
	gpu := pool(withModes(), nil)
	gpu.Spec.Platform.Kubevirt.KubevirtHostDevices = []hyperv1.KubevirtHostDevice{{DeviceName: "nvidia.com/A100", Count: 1}}
	for name, tc := range map[string]struct {
		np       *hyperv1.NodePool
		class    *storagev1.StorageClass
		external bool
	}{
		"the shared class, no access modes":         {pool(withModes(), nil), shared, false},
		"ReadWriteMany asked for":                   {pool(withModes(corev1.ReadWriteMany), nil), local, false},
		"ReadWriteOnce asked for on a shared class": {pool(withModes(corev1.ReadWriteOnce), nil), shared, true},
		"the node-local class":                      {pool(withModes(), nil), local, true},
		"no class known":                            {pool(nil, nil), nil, true},
		"host devices":                              {gpu, shared, true},
	} {
		np := tc.np
		got := VirtualMachine(np, "w", Spec{Namespace: "ns", Image: "i", SharedRoot: RootShared(np, tc.class)}).Spec.Template.Spec.EvictionStrategy
		if external := got != nil && *got == kubevirtv1.EvictionStrategyExternal; external != tc.external || (!external && got != nil) {
			t.Errorf("%s: evictionStrategy %v, want External %v (else unset)", name, got, tc.external)
		}
	}
}

// TestEvacuatedMachines: a worker whose VMI is marked for evacuation is
// the pool's to replace only when it is External; a migratable worker
// (no strategy of its own) is left to the infrastructure's migration.
func TestEvacuatedMachines(t *testing.T) {
	vms := []kubevirtv1.VirtualMachine{{ObjectMeta: metav1.ObjectMeta{Name: "external"}}, {ObjectMeta: metav1.ObjectMeta{Name: "migrating"}}, {ObjectMeta: metav1.ObjectMeta{Name: "staying"}}}
	evacuating := func(strategy *kubevirtv1.EvictionStrategy, node string) *kubevirtv1.VirtualMachineInstance {
		return &kubevirtv1.VirtualMachineInstance{Spec: kubevirtv1.VirtualMachineInstanceSpec{EvictionStrategy: strategy},
			Status: kubevirtv1.VirtualMachineInstanceStatus{EvacuationNodeName: node}}
	}
	got := machines(vms, map[string]*kubevirtv1.VirtualMachineInstance{
		"external":  evacuating(ptr.To(kubevirtv1.EvictionStrategyExternal), "infra-1"),
		"migrating": evacuating(nil, "infra-1"),
		"staying":   evacuating(ptr.To(kubevirtv1.EvictionStrategyExternal), ""),
	})
	for i, want := range []bool{true, false, false} {
		if got[i].Evacuate != want {
			t.Errorf("%s: Evacuate %v, want %v", got[i].Name, got[i].Evacuate, want)
		}
	}
}
