package vmi

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/contracts/podnetwork"
	"github.com/tekvirt/tekvirt/contracts/podsecurity"
)

func guestVMI() *v1.VirtualMachineInstance {
	return &v1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm1", UID: "uid-1", Labels: map[string]string{"app": "web"}},
		Spec: v1.VirtualMachineInstanceSpec{Domain: v1.DomainSpec{
			Resources: v1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
	}
}

func qty(s string) resource.Quantity { return resource.MustParse(s) }

func TestLauncherPodResources(t *testing.T) {
	for name, tc := range map[string]struct {
		mod              func(*v1.VirtualMachineInstance)
		requests, limits corev1.ResourceList
	}{
		"memory request, one vCPU, no pod interface": {func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.AutoattachPodInterface = new(bool)
		},
			// 256Mi + 200Mi + 256Mi/512 + 8Mi = 464.5Mi
			corev1.ResourceList{corev1.ResourceMemory: qty("487063552"), corev1.ResourceCPU: qty("100m")}, nil},
		"the default pod interface: a tun device": {func(*v1.VirtualMachineInstance) {},
			corev1.ResourceList{corev1.ResourceMemory: qty("487063552"), corev1.ResourceCPU: qty("100m"), podnetwork.TunResource: qty("1")},
			corev1.ResourceList{podnetwork.TunResource: qty("1")}},
		"four vCPUs and a CPU request": {func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.CPU = &v1.CPU{Sockets: 2, Cores: 2}
			vmi.Spec.Domain.Resources.Requests[corev1.ResourceCPU] = qty("1500m")
		}, corev1.ResourceList{corev1.ResourceMemory: qty("512229376"), corev1.ResourceCPU: qty("1500m"), podnetwork.TunResource: qty("1")},
			corev1.ResourceList{podnetwork.TunResource: qty("1")}},
		"overcommitted guest and a memory limit": {func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Memory = &v1.Memory{Guest: ptrQty("1Gi")}
			vmi.Spec.Domain.Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: qty("1Gi")}
			vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{{Name: "default"}}
		}, corev1.ResourceList{corev1.ResourceMemory: qty("488636416"), corev1.ResourceCPU: qty("100m"), podnetwork.TunResource: qty("1")}, // 256Mi + 200Mi + 2Mi + 8Mi
			corev1.ResourceList{corev1.ResourceMemory: qty("1293942784"), podnetwork.TunResource: qty("1")}}, // 1Gi + the same overhead
		"host devices and an extended resource": {func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Domain.Devices.GPUs = []v1.GPU{{Name: "g1", DeviceName: "nvidia.com/GP102"}, {Name: "g2", DeviceName: "nvidia.com/GP102"}}
			vmi.Spec.Domain.Devices.HostDevices = []v1.HostDevice{{Name: "h1", DeviceName: "intel.com/qat"}}
			vmi.Spec.Domain.Resources.Requests["example.com/dongle"] = qty("1")
			vmi.Spec.Domain.Devices.AutoattachPodInterface = new(bool)
		}, corev1.ResourceList{corev1.ResourceMemory: qty("487063552"), corev1.ResourceCPU: qty("100m"),
			"nvidia.com/GP102": qty("2"), "intel.com/qat": qty("1"), "example.com/dongle": qty("1")},
			corev1.ResourceList{"nvidia.com/GP102": qty("2"), "intel.com/qat": qty("1")}},
	} {
		vmi := guestVMI()
		tc.mod(vmi)
		pod, err := LauncherPod(vmi, "reg/launcher@sha256:1")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := pod.Spec.Containers[0].Resources
		if !equalLists(got.Requests, tc.requests) || !equalLists(got.Limits, tc.limits) {
			t.Errorf("%s: requests %v limits %v; want %v and %v", name, got.Requests, got.Limits, tc.requests, tc.limits)
		}
	}
	vmi := guestVMI()
	vmi.Spec.Domain.Resources.Requests = nil
	if _, err := LauncherPod(vmi, "x"); err == nil || !strings.Contains(err.Error(), "requests.memory") {
		t.Errorf("a VMI without memory: %v", err)
	}
}

func ptrQty(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

func equalLists(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if w, ok := b[k]; !ok || q.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

func TestLauncherPodSchedulingLabelsAndVolumes(t *testing.T) {
	vmi := guestVMI()
	grace := int64(10)
	vmi.Spec.TerminationGracePeriodSeconds = &grace
	vmi.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "node2"}
	vmi.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	vmi.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}}
	vmi.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule}}
	vmi.Spec.PriorityClassName, vmi.Spec.SchedulerName = "high", "my-scheduler"
	vmi.Spec.Volumes = []v1.Volume{
		{Name: "containerdisk", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}},
		{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-pvc", ReadOnly: true}}}},
		{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "root-dv"}}},
	}
	pod, err := LauncherPod(vmi, "reg/launcher@sha256:1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"app": "web", "kubevirt.io": "virt-launcher", "kubevirt.io/created-by": "uid-1", "vm.kubevirt.io/name": "vm1"}
	if !reflect.DeepEqual(pod.Labels, want) || pod.GenerateName != "virt-launcher-vm1-" || pod.Namespace != "ns" {
		t.Errorf("meta %s/%s %v", pod.Namespace, pod.GenerateName, pod.Labels)
	}
	if o := pod.OwnerReferences; len(o) != 1 || o[0].Kind != "VirtualMachineInstance" || o[0].UID != "uid-1" || o[0].Controller == nil || !*o[0].Controller {
		t.Errorf("owner %+v", o)
	}
	s := pod.Spec
	if !reflect.DeepEqual(s.NodeSelector, vmi.Spec.NodeSelector) || !reflect.DeepEqual(s.Tolerations, vmi.Spec.Tolerations) ||
		s.Affinity != vmi.Spec.Affinity || !reflect.DeepEqual(s.TopologySpreadConstraints, vmi.Spec.TopologySpreadConstraints) ||
		s.PriorityClassName != "high" || s.SchedulerName != "my-scheduler" || *s.TerminationGracePeriodSeconds != 25 ||
		s.RestartPolicy != corev1.RestartPolicyNever || *s.AutomountServiceAccountToken {
		t.Errorf("spec %+v", s)
	}
	c := s.Containers[0]
	if got := strings.Join(c.Command, " "); got != "/ko-app/tekvirt-launcher --dir /var/run/tekvirt/vm --libvirtd /var/run/tekvirt/libvirt --disks-dir /var/run/kubevirt-private/vmi-disks" || c.Image != "reg/launcher@sha256:1" {
		t.Errorf("container %s: %s", c.Image, got)
	}
	claims := map[string]string{}
	for _, v := range s.Volumes {
		if v.PersistentVolumeClaim != nil {
			claims[v.Name] = v.PersistentVolumeClaim.ClaimName
		}
		if v.HostPath != nil {
			t.Errorf("volume %s mounts the node's %s: a launcher Pod mounts nothing of the node", v.Name, v.HostPath.Path)
		}
		if (v.Name == "vm" || v.Name == "images") && v.EmptyDir == nil {
			t.Errorf("volume %s is not an emptyDir", v.Name)
		}
	}
	if !reflect.DeepEqual(claims, map[string]string{"volume-1": "data-pvc", "volume-2": "root-dv"}) {
		t.Errorf("claims %v (a containerDisk is not a Pod volume)", claims)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if m.Name == "volume-1" && !m.ReadOnly || m.Name == "images" && !m.ReadOnly {
			t.Errorf("mount %s must be read-only", m.Name)
		}
		// The handler mounts the VM's images after the Pod started.
		if m.Name == "images" && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
			t.Errorf("images mount propagation %v, want HostToContainer", m.MountPropagation)
		}
	}
	if mounts["vm"] != "/var/run/tekvirt/vm" || mounts["volume-1"] != "/var/run/kubevirt-private/vmi-disks/data" ||
		mounts["volume-2"] != "/var/run/kubevirt-private/vmi-disks/root" || mounts["images"] != "/var/lib/tekvirt/images" {
		t.Errorf("mounts %v", mounts)
	}
}

func TestLauncherPodAccessCredentials(t *testing.T) {
	vmi := guestVMI()
	vmi.Spec.AccessCredentials = []v1.AccessCredential{
		{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{Source: v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "keys"}}}},
		{UserPassword: &v1.UserPasswordAccessCredential{Source: v1.UserPasswordAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "pw"}}}},
	}
	pod, err := LauncherPod(vmi, "img")
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if v.Secret != nil {
			secrets[v.Name] = v.Secret.SecretName
		}
	}
	if want := map[string]string{"access-credential-0": "keys", "access-credential-1": "pw"}; !reflect.DeepEqual(secrets, want) {
		t.Errorf("secret volumes %v, want %v", secrets, want)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range pod.Spec.Containers[0].VolumeMounts {
		mounts[m.Name] = m
	}
	for i, name := range []string{"access-credential-0", "access-credential-1"} {
		if m := mounts[name]; !m.ReadOnly || m.MountPath != launcherpod.AccessCredentialPath(i) {
			t.Errorf("mount %s: %+v", name, m)
		}
	}
}

// TestLauncherPodMeetsRestricted checks launcher Pods against Pod Security
// Admission's own checks at "restricted", for VMIs with every kind of
// volume the Pod mounts.
func TestLauncherPodMeetsRestricted(t *testing.T) {
	for name, mod := range map[string]func(*v1.VirtualMachineInstance){
		"containerDisk": func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{{Name: "root", VolumeSource: v1.VolumeSource{ContainerDisk: &v1.ContainerDiskSource{Image: "img"}}}}
		},
		"claims and credentials": func(vmi *v1.VirtualMachineInstance) {
			vmi.Spec.Volumes = []v1.Volume{
				{Name: "root", VolumeSource: v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "dv"}}},
				{Name: "data", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
			}
			vmi.Spec.AccessCredentials = []v1.AccessCredential{{SSHPublicKey: &v1.SSHPublicKeyAccessCredential{
				Source: v1.SSHPublicKeyAccessCredentialSource{Secret: &v1.AccessCredentialSecretSource{SecretName: "keys"}}}}}
		},
	} {
		vmi := guestVMI()
		mod(vmi)
		pod, err := LauncherPod(vmi, "img")
		if err != nil {
			t.Fatal(err)
		}
		if v, err := podsecurity.Violations(&pod.ObjectMeta, &pod.Spec); err != nil || len(v) > 0 {
			t.Errorf("%s: the launcher Pod violates restricted: %v %v", name, v, err)
		}
		sc := pod.Spec.SecurityContext
		if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != launcherpod.User || len(sc.Sysctls) != 3 ||
			sc.Sysctls[0].Name != "net.ipv4.ip_unprivileged_port_start" || sc.Sysctls[1].Name != "net.ipv4.tcp_rmem" || sc.Sysctls[2].Name != "net.ipv4.tcp_wmem" {
			t.Errorf("%s: Pod security context %+v, want user %d, the unprivileged-port and the TCP buffer sysctls", name, sc, launcherpod.User)
		}
	}
}

// The Multus request as KubeVirt writes it: the Pod interface's hashed
// name, the NetworkAttachmentDefinition's namespace spelt out, the MAC
// only when the interface names one; nothing for the pod network.
func TestNetworksAnnotation(t *testing.T) {
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: "own", Name: "v"}}
	vmi.Spec.Domain.Devices.Interfaces = []v1.Interface{
		{Name: "default", InterfaceBindingMethod: v1.InterfaceBindingMethod{Masquerade: &v1.InterfaceMasquerade{}}},
		{Name: "red", MacAddress: "02:00:00:00:00:07", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
		{Name: "green", InterfaceBindingMethod: v1.InterfaceBindingMethod{Bridge: &v1.InterfaceBridge{}}},
	}
	vmi.Spec.Networks = []v1.Network{
		*v1.DefaultPodNetwork(),
		{Name: "red", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "blue"}}},
		{Name: "green", NetworkSource: v1.NetworkSource{Multus: &v1.MultusNetwork{NetworkName: "own/lan"}}},
	}
	got, err := NetworksAnnotation(vmi)
	want := `[{"name":"blue","namespace":"own","mac":"02:00:00:00:00:07","interface":"podb1f51a511f1"},{"name":"lan","namespace":"own","interface":"podba4788b226a"}]`
	if err != nil || got != want {
		t.Errorf("got %s %v\nwant %s", got, err, want)
	}
	vmi.Spec.Domain.Memory = &v1.Memory{Guest: ptr.To(resource.MustParse("64Mi"))}
	pod, err := LauncherPod(vmi, "launcher")
	if err != nil {
		t.Fatal(err)
	}
	if got := pod.Annotations[podnetwork.NetworksAnnotation]; got != want {
		t.Errorf("launcher Pod annotation %s", got)
	}
	vmi.Spec.Networks = vmi.Spec.Networks[:1]
	if got, err := NetworksAnnotation(vmi); got != "" || err != nil {
		t.Errorf("the pod network alone: %q %v, want nothing", got, err)
	}
}
