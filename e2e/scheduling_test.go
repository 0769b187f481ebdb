package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	vmipod "github.com/tekvirt/tekvirt/controllers/vmi"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// freeMemory is what the scheduler still has to give on node: its
// allocatable memory less the requests of the Pods bound to it that have
// not ended. It waits for Pods being deleted (earlier tests' launchers) to
// go, since they free their memory when they do.
func freeMemory(t *testing.T, f *framework.Framework, node string) *resource.Quantity {
	t.Helper()
	ctx := context.Background()
	n, err := f.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	free := n.Status.Allocatable.Memory().DeepCopy()
	var pods *corev1.PodList
	// An earlier test's namespace being deleted has Pods not yet marked.
	framework.Eventually(t, 2*time.Minute, "no namespace and no Pod on the node being deleted", func() error {
		nss, err := f.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nss.Items {
			if n.Status.Phase == corev1.NamespaceTerminating {
				return fmt.Errorf("namespace %s is being deleted", n.Name)
			}
		}
		if pods, err = f.Kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return fmt.Errorf("pod %s/%s is being deleted", p.Namespace, p.Name)
			}
		}
		return nil
	})
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			free.Sub(*c.Resources.Requests.Memory())
		}
	}
	return &free
}

// waitScheduling waits for VMI ns/name to stay Scheduling with the
// scheduler's message, which holds want, as its PodScheduled condition.
func waitScheduling(t *testing.T, c client.Client, ns, name, want string) {
	t.Helper()
	framework.WaitVMI(t, c, ns, name, time.Minute, "Scheduling with the scheduler's message", func(v *v1.VirtualMachineInstance) error {
		for _, cond := range v.Status.Conditions {
			if cond.Type == vmipod.PodScheduledCondition && cond.Status == corev1.ConditionFalse &&
				strings.Contains(cond.Message, want) && v.Status.Phase == v1.Scheduling {
				return nil
			}
		}
		return fmt.Errorf("phase %q, conditions %+v", v.Status.Phase, v.Status.Conditions)
	})
}

// TestSchedulerCountsVMMemory: kube-scheduler sees VM memory. A VM larger
// than the node stays Scheduling with the scheduler's own message; a Pod
// that would fit beside the node's other Pods but not beside a running VM
// stays Pending until the VM is gone.
func TestSchedulerCountsVMMemory(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	node := nodeName(t, f)

	huge := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"}, Spec: framework.GuestVMI(framework.GuestImage, "huge")}
	n, err := f.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tooMuch := n.Status.Allocatable.Memory().DeepCopy()
	tooMuch.Add(resource.MustParse("1Gi"))
	huge.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = tooMuch
	if err := c.Create(ctx, huge); err != nil {
		t.Fatal(err)
	}
	waitScheduling(t, c, ns, huge.Name, "Insufficient memory")
	if err := c.Delete(ctx, huge); err != nil {
		t.Fatal(err)
	}

	before := freeMemory(t, f, node)
	// The VM and the Pod are held to one node: on two, the Pod would fit
	// on the other.
	onNode := map[string]string{corev1.LabelHostname: node}
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "holder"}, Spec: framework.GuestVMI(framework.GuestImage, "holder")}
	vmi.Spec.NodeSelector = onNode
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	running := framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "running", framework.AgentConnected)
	held := f.LauncherPod(t, running).Spec.Containers[0].Resources.Requests.Memory()
	// Fits beside every other Pod, not beside the VM's launcher Pod.
	want := before.DeepCopy()
	want.Sub(resource.MustParse("64Mi"))
	if held.Cmp(resource.MustParse("128Mi")) <= 0 {
		t.Fatalf("the launcher Pod requests %s; the scenario needs more than 128Mi", held)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "needs-the-vms-memory"},
		Spec: corev1.PodSpec{NodeSelector: onNode, Containers: []corev1.Container{{Name: "pause", Image: cluster.RegistryAddr + "/tekvirt/tekvirt-pause:latest",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: want}}}}}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// It holds most of the node's memory once scheduled: gone before the
	// next test starts VMs.
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0))
		framework.WaitGone(t, c, pod, time.Minute)
	})
	framework.Eventually(t, time.Minute, "the Pod Pending for memory the VM holds", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		for _, cond := range pod.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "Insufficient memory") {
				return nil
			}
		}
		return fmt.Errorf("pod on %q, conditions %+v", pod.Spec.NodeName, pod.Status.Conditions)
	})
	if err := c.Delete(ctx, running); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the Pod scheduled once the VM is gone", func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return err
		}
		if pod.Spec.NodeName == "" {
			return fmt.Errorf("still Pending: %+v", pod.Status.Conditions)
		}
		return nil
	})
}

// TestExposeVMIReachesGuestSSH: `tekvirt expose vmi` (as virtctl expose)
// makes a Service whose cluster IP reaches the guest's sshd through the
// launcher Pod; a VMI declaring interface ports is admitted and runs.
func TestExposeVMIReachesGuestSSH(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exposed", Labels: map[string]string{"app": "exposed"}},
		Spec: framework.GuestVMI(framework.GuestImage, "exposed")}
	// Listed ports are the only ones forwarded from the Pod's address.
	vmi.Spec.Domain.Devices.Interfaces[0].Ports = []v1.Port{{Name: "ssh", Port: 22}, {Name: "web", Protocol: "TCP", Port: 8080}}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "running", framework.AgentConnected)
	cmd := exec.Command(f.Bin("tekvirt"), "expose", "vmi", vmi.Name, "-n", ns, "--name", "exposed-ssh", "--port", "2222", "--target-port", "22")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tekvirt expose: %v\n%s", err, out)
	}
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "exposed-ssh"}, svc); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "the guest's SSH banner through the Service", func() error {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(svc.Spec.ClusterIP, "2222"), 3*time.Second)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		banner, err := bufio.NewReader(conn).ReadString('\n')
		if !strings.HasPrefix(banner, "SSH-2.0-") {
			return fmt.Errorf("read %q: %w", banner, err)
		}
		return nil
	})
}
