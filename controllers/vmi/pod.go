package vmi

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
	"github.com/tekvirt/tekvirt/contracts/vmisubset"
	"github.com/tekvirt/tekvirt/controllers/hotplug"
)

// Labels of a launcher Pod, as KubeVirt's; the VMI's own labels are copied
// too, so a Service selecting the VMI's labels selects its Pod.
const (
	AppLabel       = "kubevirt.io"
	AppLauncher    = "virt-launcher"
	CreatedByLabel = "kubevirt.io/created-by"
	VMNameLabel    = "vm.kubevirt.io/name"
)

// The launcher's memory overhead, beyond the guest's memory: the launcher
// and its libvirtd, QEMU's own memory and TCG's translation buffer, plus
// page tables (1/512 of the guest) and a share per vCPU, as KubeVirt sizes
// its virt-launcher.
var (
	baseOverhead    = resource.MustParse("200Mi")
	perVCPUOverhead = resource.MustParse("8Mi")
)

// cpuAllocationRatio is KubeVirt's default: a vCPU without a CPU request
// asks for 1/10 of a core.
const cpuAllocationRatio = 10

// GuestMemory is what the guest is given: memory.guest, else the memory
// request.
func GuestMemory(vmi *v1.VirtualMachineInstance) (resource.Quantity, error) {
	if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
		return *m.Guest, nil
	}
	if q, ok := vmi.Spec.Domain.Resources.Requests[corev1.ResourceMemory]; ok {
		return q, nil
	}
	return resource.Quantity{}, fmt.Errorf("spec.domain.resources.requests.memory or spec.domain.memory.guest is required")
}

// VCPUs is the guest's vCPU count (sockets x cores x threads, each 1 when
// unset).
func VCPUs(vmi *v1.VirtualMachineInstance) int64 {
	cpu := vmi.Spec.Domain.CPU
	if cpu == nil {
		return 1
	}
	n := int64(1)
	for _, v := range []uint32{cpu.Sockets, cpu.Cores, cpu.Threads} {
		if v > 0 {
			n *= int64(v)
		}
	}
	return n
}

// MemoryOverhead is the memory the launcher Pod needs beyond the guest's.
func MemoryOverhead(guest resource.Quantity, vcpus int64) resource.Quantity {
	o := baseOverhead.DeepCopy()
	o.Add(*resource.NewQuantity(guest.Value()/512, resource.BinarySI))
	per := perVCPUOverhead.DeepCopy()
	for range vcpus {
		o.Add(per)
	}
	return o
}

// resources are the compute container's: the guest's memory plus the
// overhead, the CPU the VMI asks for (or its vCPUs at the allocation
// ratio), the extended resources it names, and one of each host device.
func resources(vmi *v1.VirtualMachineInstance) (corev1.ResourceRequirements, error) {
	guest, err := GuestMemory(vmi)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	vcpus := VCPUs(vmi)
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for name, q := range vmi.Spec.Domain.Resources.Requests {
		out.Requests[name] = q
	}
	for name, q := range vmi.Spec.Domain.Resources.Limits {
		out.Limits[name] = q
	}
	overhead := MemoryOverhead(guest, vcpus)
	mem := guest.DeepCopy()
	if q, ok := out.Requests[corev1.ResourceMemory]; ok {
		mem = q.DeepCopy()
	}
	mem.Add(overhead)
	out.Requests[corev1.ResourceMemory] = mem
	if q, ok := out.Limits[corev1.ResourceMemory]; ok {
		q.Add(overhead)
		out.Limits[corev1.ResourceMemory] = q
	}
	if _, ok := out.Requests[corev1.ResourceCPU]; !ok {
		out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(vcpus*1000/cpuAllocationRatio, resource.DecimalSI)
	}
	var devices []string
	for _, d := range vmi.Spec.Domain.Devices.HostDevices {
		devices = append(devices, d.DeviceName)
	}
	for _, g := range vmi.Spec.Domain.Devices.GPUs {
		devices = append(devices, g.DeviceName)
	}
	for _, name := range devices {
		if err := ExtendedResource(name); err != nil {
			return corev1.ResourceRequirements{}, err
		}
		rn := corev1.ResourceName(name)
		q := out.Limits[rn]
		q.Add(*resource.NewQuantity(1, resource.DecimalSI))
		out.Limits[rn], out.Requests[rn] = q, q
	}
	if hasPodInterface(vmi) {
		one := *resource.NewQuantity(1, resource.DecimalSI)
		out.Limits[podnetwork.TunResource], out.Requests[podnetwork.TunResource] = one, one
	}
	if len(out.Limits) == 0 {
		out.Limits = nil
	}
	return out, nil
}

// hasPodInterface: the VMI lists an interface (on the pod network or a
// Multus one), or gets KubeVirt's default one on the pod network (it lists
// no network and does not turn it off); QEMU then opens a tap, through the
// /dev/net/tun the handler's device plugin gives the Pod.
func hasPodInterface(vmi *v1.VirtualMachineInstance) bool {
	auto := vmi.Spec.Domain.Devices.AutoattachPodInterface
	return len(vmi.Spec.Domain.Devices.Interfaces) > 0 || len(vmi.Spec.Networks) == 0 && (auto == nil || *auto)
}

// ExtendedResource checks that a host device's deviceName is an extended
// resource, as device plugins advertise them ("vendor.com/device"): the
// launcher Pod requests one per device, and a name like "memory" would
// otherwise replace the Pod's own memory request.
func ExtendedResource(name string) error {
	switch {
	case !strings.Contains(name, "/") || strings.Contains(name, "kubernetes.io/") || strings.HasPrefix(name, "requests."):
		return fmt.Errorf("device %q is not an extended resource (<domain>/<name>, outside kubernetes.io)", name)
	case len(validation.IsQualifiedName(name)) > 0:
		return fmt.Errorf("device %q is not an extended resource: %s", name, strings.Join(validation.IsQualifiedName(name), ", "))
	}
	return nil
}

// emptyDir is a Pod-local volume and its mount in the compute container.
func emptyDir(name, at string, readOnly bool, propagation *corev1.MountPropagationMode) (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.VolumeMount{Name: name, MountPath: at, ReadOnly: readOnly, MountPropagation: propagation}
}

// LauncherPod is the Pod that runs vmi with the launcher image.
func LauncherPod(vmi *v1.VirtualMachineInstance, image string) (*corev1.Pod, error) {
	res, err := resources(vmi)
	if err != nil {
		return nil, err
	}
	// The Pod mounts nothing of the node: the handler reaches these two
	// volumes where the kubelet keeps them (launcherpod.EmptyDirOnNode).
	vmVol, vmMount := emptyDir(launcherpod.VMVolume, launcherpod.VMDir, false, nil)
	imgVol, imgMount := emptyDir(launcherpod.ImagesVolume, launcherpod.ImagesDir, true, ptr.To(corev1.MountPropagationHostToContainer))
	libvirtVol, libvirtMount := emptyDir(launcherpod.LibvirtdVolume, launcherpod.LibvirtdDir, false, nil)
	hotplugVol, hotplugMount := emptyDir(launcherpod.HotplugVolume, launcherpod.HotplugDir, true, ptr.To(corev1.MountPropagationHostToContainer))
	volumes := []corev1.Volume{vmVol, imgVol, libvirtVol, hotplugVol}
	mounts := []corev1.VolumeMount{vmMount, imgMount, libvirtMount, hotplugMount}
	for i, vol := range vmi.Spec.Volumes {
		var claim string
		readOnly := false
		switch {
		case hotplug.IsHotplug(vol):
			continue // an attachment Pod holds it, once the VM runs
		case vol.PersistentVolumeClaim != nil:
			claim, readOnly = vol.PersistentVolumeClaim.ClaimName, vol.PersistentVolumeClaim.ReadOnly
		case vol.DataVolume != nil:
			claim = vol.DataVolume.Name
		default:
			continue
		}
		// Pod volume names come from the index: a VMI volume name may clash
		// with the Pod's own.
		name := fmt.Sprintf("volume-%d", i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: readOnly}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: path.Join(launcherpod.DisksDir, vol.Name), ReadOnly: readOnly})
	}
	for i, cred := range vmi.Spec.AccessCredentials {
		name := launcherpod.AccessCredentialVolume(i)
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: vmisubset.CredentialSecret(cred)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: launcherpod.AccessCredentialPath(i), ReadOnly: true})
	}
	labels := map[string]string{}
	for k, v := range vmi.Labels {
		labels[k] = v
	}
	labels[AppLabel], labels[CreatedByLabel], labels[VMNameLabel] = AppLauncher, string(vmi.UID), vmi.Name
	var annotations map[string]string
	if nets, err := NetworksAnnotation(vmi); err != nil {
		return nil, err
	} else if nets != "" {
		annotations = map[string]string{podnetwork.NetworksAnnotation: nets}
	}
	grace := int64(180)
	if g := vmi.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	spec := vmi.Spec
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: vmi.Namespace, GenerateName: "virt-launcher-" + vmi.Name + "-", Labels: labels, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(vmi, v1.VirtualMachineInstanceGroupVersionKind)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			NodeSelector:                  spec.NodeSelector,
			Affinity:                      spec.Affinity,
			Tolerations:                   spec.Tolerations,
			TopologySpreadConstraints:     spec.TopologySpreadConstraints,
			PriorityClassName:             spec.PriorityClassName,
			SchedulerName:                 spec.SchedulerName,
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			TerminationGracePeriodSeconds: ptr.To(grace + 15), // the guest's grace, then libvirtd's stop
			Volumes:                       volumes,
			SecurityContext:               podSecurity(),
			Containers: []corev1.Container{{
				Name:            launcherpod.ComputeContainer,
				Image:           image,
				Command:         []string{"/ko-app/tekvirt-launcher", "--dir", launcherpod.VMDir, "--libvirtd", launcherpod.LibvirtdDir, "--disks-dir", launcherpod.DisksDir},
				Resources:       res,
				VolumeMounts:    mounts,
				SecurityContext: podsecurity.Container(),
			}},
		},
	}, nil
}

// podSecurity meets Pod Security "restricted": the launcher, libvirtd and
// QEMU run as launcherpod.User (QEMU emulates with TCG on a tap the
// handler made for it, so nothing in the Pod needs a privilege; the
// node-side work is the handler's). Its sysctls are safe and namespaced
// (Kubernetes 1.32 and later allow the TCP ones): the first lets that user
// serve DHCP (port 67) to the guest; the others cap the Pod's TCP buffers
// (the guest's own traffic is forwarded, not through them), so that a
// migration's streams do not queue tens of megabytes at their QEMU, which
// a switch-over then waits for while the guest is paused.
func podSecurity() *corev1.PodSecurityContext {
	sc := podsecurity.Pod(launcherpod.User)
	sc.Sysctls = []corev1.Sysctl{
		{Name: "net.ipv4.ip_unprivileged_port_start", Value: "67"},
		{Name: "net.ipv4.tcp_rmem", Value: launcherpod.TCPReceiveBuffers},
		{Name: "net.ipv4.tcp_wmem", Value: launcherpod.TCPSendBuffers},
	}
	return sc
}

// NetworksAnnotation is the launcher Pod's request to Multus for vmi's
// Multus networks (podnetwork.NetworksAnnotation), as KubeVirt writes it:
// each NetworkAttachmentDefinition with the Pod interface's hashed name
// and the interface's MAC when it names one; empty when it has none.
func NetworksAnnotation(vmi *v1.VirtualMachineInstance) (string, error) {
	macs := map[string]string{}
	for _, iface := range vmi.Spec.Domain.Devices.Interfaces {
		macs[iface.Name] = iface.MacAddress
	}
	var elems []nadv1.NetworkSelectionElement
	for i, n := range vmi.Spec.Networks {
		if n.Multus == nil {
			continue
		}
		ns, name, err := podnetwork.NetworkAttachment(n.Multus.NetworkName, vmi.Namespace)
		if err != nil {
			return "", fmt.Errorf("spec.networks[%d].multus.%w", i, err)
		}
		elems = append(elems, nadv1.NetworkSelectionElement{
			Name: name, Namespace: ns, InterfaceRequest: podnetwork.SecondaryInterface(n.Name), MacRequest: macs[n.Name],
		})
	}
	if len(elems) == 0 {
		return "", nil
	}
	out, err := json.Marshal(elems)
	return string(out), err
}
