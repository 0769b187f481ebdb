package nodepool

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

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

// Labels on every worker VM, its VMI and the pool's cache DataVolume.
const (
	// PoolLabel names the NodePool, as HyperShift labels its machines.
	PoolLabel = "hypershift.openshift.io/nodePool"
	// PoolNamespaceLabel names the NodePool's namespace.
	PoolNamespaceLabel = "tekvirt.io/node-pool-namespace"
	// RemovingAnnotation marks a worker chosen to go: its hosted node is
	// drained, then the VM deleted.
	RemovingAnnotation = "tekvirt.io/node-pool-removing"
)

// Defaults of the KubeVirt platform where the NodePool leaves a field out
// (the CRD defaults most of them).
var (
	defaultCores      = uint32(2)
	defaultMemory     = resource.MustParse("8Gi")
	defaultRootVolume = resource.MustParse("32Gi")
)

// Spec is what a worker VM is made from besides the NodePool.
type Spec struct {
	Namespace string // the control-plane namespace
	Image     string // the containerDisk the root volume is made from
	UserData  string // the worker's cloud-init user-data
	// Cache, when set, is the DataVolume each root volume is cloned from.
	Cache string
	// SharedRoot says the root volumes are ReadWriteMany (the pool's
	// access modes, or its class's when it names none; RootShared).
	SharedRoot bool
}

// RootShared says whether np's root volumes will be ReadWriteMany, class
// being the StorageClass they get (nil when unknown).
func RootShared(np *hyperv1.NodePool, class *storagev1.StorageClass) bool {
	st, _ := rootVolume(np)
	modes := st.AccessModes
	if len(modes) == 0 {
		modes = hostpath.AccessModes(class)
	}
	return slices.Contains(modes, corev1.ReadWriteMany)
}

// evictionStrategy is a worker's: a worker that can live-migrate (its
// root volume shared, no host devices) takes the infrastructure's default,
// so that a drain with LiveMigrate moves it and its hosted node stays;
// any other is External, the NodePool controller replacing it when
// evicted.
func evictionStrategy(np *hyperv1.NodePool, s Spec) *kubevirtv1.EvictionStrategy {
	if s.SharedRoot && len(kubevirtPlatform(np).KubevirtHostDevices) == 0 {
		return nil
	}
	return ptr.To(kubevirtv1.EvictionStrategyExternal)
}

// Labels are the labels of np's workers.
func Labels(np *hyperv1.NodePool) map[string]string {
	return map[string]string{PoolLabel: np.Name, PoolNamespaceLabel: np.Namespace}
}

func kubevirtPlatform(np *hyperv1.NodePool) *hyperv1.KubevirtNodePoolPlatform {
	if k := np.Spec.Platform.Kubevirt; k != nil {
		return k
	}
	return &hyperv1.KubevirtNodePoolPlatform{}
}

// rootVolume is the size, class, access modes and volume mode of np's root
// volumes.
func rootVolume(np *hyperv1.NodePool) (cdiv1.StorageSpec, resource.Quantity) {
	size := defaultRootVolume
	st := cdiv1.StorageSpec{}
	if rv := kubevirtPlatform(np).RootVolume; rv != nil && rv.Persistent != nil {
		p := rv.Persistent
		if p.Size != nil {
			size = *p.Size
		}
		st.StorageClassName = p.StorageClass
		for _, m := range p.AccessModes {
			st.AccessModes = append(st.AccessModes, corev1.PersistentVolumeAccessMode(m))
		}
		st.VolumeMode = p.VolumeMode
	}
	st.Resources = corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}}
	return st, size
}

// Image is the containerDisk np's workers boot: the pool's own, or def
// (the project's worker image).
func Image(np *hyperv1.NodePool, def string) string {
	if rv := kubevirtPlatform(np).RootVolume; rv != nil && rv.Image != nil && rv.Image.ContainerDiskImage != nil && *rv.Image.ContainerDiskImage != "" {
		return *rv.Image.ContainerDiskImage
	}
	return def
}

// UsesCache says whether np's root volumes are clones of a cache.
func UsesCache(np *hyperv1.NodePool) bool {
	rv := kubevirtPlatform(np).RootVolume
	return rv != nil && rv.CacheStrategy != nil && rv.CacheStrategy.Type == hyperv1.KubevirtCachingStrategyPVC
}

// CacheName is np's boot-image cache DataVolume for image: a new image
// gets a new cache.
func CacheName(np *hyperv1.NodePool, image string) string {
	h := sha256.Sum256([]byte(image))
	name := np.Name
	if len(name) > 40 {
		name = name[:40]
	}
	return name + "-boot-cache-" + hex.EncodeToString(h[:])[:8]
}

// registrySource imports image with the node's runtime, as HyperShift's
// root volumes do, so the node's registry configuration applies.
func registrySource(image string) *cdiv1.DataVolumeSource {
	return &cdiv1.DataVolumeSource{Registry: &cdiv1.DataVolumeSourceRegistry{
		URL: ptr.To("docker://" + image), PullMethod: ptr.To(cdiv1.RegistryPullNode)}}
}

// CacheDataVolume is the cache of np's boot image in the control-plane
// namespace ns.
func CacheDataVolume(np *hyperv1.NodePool, ns, image string) *cdiv1.DataVolume {
	st, _ := rootVolume(np)
	return &cdiv1.DataVolume{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: CacheName(np, image), Labels: Labels(np)},
		Spec:       cdiv1.DataVolumeSpec{Source: registrySource(image), Storage: &st},
	}
}

// VirtualMachine is worker name of np: the pool's compute, a root volume
// (a clone of the cache, or the image imported), the user-data, the pool's
// nodeSelector, and a soft spread over the infrastructure's nodes.
func VirtualMachine(np *hyperv1.NodePool, name string, s Spec) *kubevirtv1.VirtualMachine {
	k := kubevirtPlatform(np)
	cores, memory := defaultCores, defaultMemory
	guaranteed := false
	if c := k.Compute; c != nil {
		if c.Cores != nil {
			cores = *c.Cores
		}
		if c.Memory != nil {
			memory = *c.Memory
		}
		guaranteed = c.QosClass != nil && *c.QosClass == hyperv1.QoSClassGuaranteed
	}
	res := kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: memory}}
	if guaranteed {
		cpu := *resource.NewQuantity(int64(cores), resource.DecimalSI)
		res.Requests[corev1.ResourceCPU] = cpu
		res.Limits = corev1.ResourceList{corev1.ResourceMemory: memory, corev1.ResourceCPU: cpu}
	}
	st, _ := rootVolume(np)
	src := registrySource(s.Image)
	if s.Cache != "" {
		src = &cdiv1.DataVolumeSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: s.Namespace, Name: s.Cache}}
	}
	root := name + "-rootdisk"
	labels := Labels(np)
	grace := int64(30)
	virtio := kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}
	return &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: name, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{
			RunStrategy: ptr.To(kubevirtv1.RunStrategyAlways),
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{
				ObjectMeta: metav1.ObjectMeta{Name: root, Labels: labels},
				Spec:       cdiv1.DataVolumeSpec{Source: src, Storage: &st},
			}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				// On the pod network by the bridge binding, as HyperShift's
				// workers: the node's address is its launcher Pod's, which
				// the hosted cluster's overlay runs between. A migration
				// gives it the target Pod's (the guest's link is refreshed
				// and it asks DHCP again), as KubeVirt allows by annotation.
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{kubevirtv1.AllowPodBridgeNetworkLiveMigrationAnnotation: ""}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					EvictionStrategy:              evictionStrategy(np, s),
					TerminationGracePeriodSeconds: &grace,
					NodeSelector:                  k.NodeSelector,
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Domain: kubevirtv1.DomainSpec{
						CPU:       &kubevirtv1.CPU{Cores: cores},
						Resources: res,
						Devices: kubevirtv1.Devices{
							HostDevices: hostDevices(k.KubevirtHostDevices),
							Disks: []kubevirtv1.Disk{
								{Name: "rootdisk", DiskDevice: virtio},
								{Name: "cloudinitdisk", DiskDevice: virtio},
							},
							Interfaces: []kubevirtv1.Interface{{Name: "default", InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}}}},
						},
					},
					Networks: []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}},
					Volumes: []kubevirtv1.Volume{
						{Name: "rootdisk", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: root}}},
						{Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{UserData: s.UserData}}},
					},
				},
			},
		},
	}
}

// maxHostDevices bounds the devices of one worker: a PCI bus has 32 slots.
const maxHostDevices = 32

// hostDevicesProblem says what is wrong with a pool's hostDevices, or "".
func hostDevicesProblem(kinds []hyperv1.KubevirtHostDevice) string {
	total := 0
	for i, k := range kinds {
		if k.Count < 1 {
			return fmt.Sprintf("spec.platform.kubevirt.hostDevices[%d] (%s): count %d is less than 1", i, k.DeviceName, k.Count)
		}
		total += min(k.Count, maxHostDevices+1)
	}
	if total > maxHostDevices {
		return fmt.Sprintf("spec.platform.kubevirt.hostDevices: more than %d devices per worker", maxHostDevices)
	}
	return ""
}

// hostDevices are count devices of each kind, named hostdevice-1, -2, ...
// across kinds (a domain's device aliases must differ). Each becomes an
// extended-resource request of the worker's launcher Pod, so only
// infrastructure nodes advertising the device take the worker.
func hostDevices(kinds []hyperv1.KubevirtHostDevice) []kubevirtv1.HostDevice {
	var out []kubevirtv1.HostDevice
	for _, k := range kinds {
		for range k.Count {
			out = append(out, kubevirtv1.HostDevice{Name: fmt.Sprintf("hostdevice-%d", len(out)+1), DeviceName: k.DeviceName})
		}
	}
	return out
}
