package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// checkWorkerReplaced: worker lost's launcher Pod is deleted, so its VM
// starts again in a new one, at a new address. Meanwhile the hosted
// LoadBalancer Service at lbAddr (in front of the app=web Pods) routes
// around it: it answers, several times in a row, from a Pod on the kept
// worker. Once lost is a Ready node again at its new address, a Pod on it
// reaches that Pod by its address: the pod network's tunnel follows the
// worker.
func checkWorkerReplaced(t *testing.T, f *framework.Framework, hosted kubernetes.Interface, cpNS, lost, kept, image, lbAddr string) {
	ctx := context.Background()
	c := f.VMClient(t)
	keptWeb := hostedPod(t, hosted, shellPod("web-kept", kept, image, map[string]string{"app": "web"},
		"mkdir -p /www && echo from-"+kept+" > /www/index.html && exec httpd -f -p 8080 -h /www"))
	vmi := &v1.VirtualMachineInstance{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lost}, vmi); err != nil {
		t.Fatal(err)
	}
	launcher := f.LauncherPod(t, vmi)
	lostAt := time.Now()
	if err := f.Kube.CoreV1().Pods(cpNS).Delete(ctx, launcher.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	inRow := 0
	framework.Eventually(t, 4*time.Minute, "the LoadBalancer answering from "+kept+" 5 times in a row", func() error {
		if err := httpWants("http://"+lbAddr+"/", "from-"+kept); err != nil {
			inRow = 0
			return err
		}
		if inRow++; inRow < 5 {
			return fmt.Errorf("%d in a row", inRow)
		}
		return nil
	})
	t.Logf("worker %s's launcher deleted -> the LoadBalancer routes around it: %s", lost, time.Since(lostAt).Round(time.Second))

	var newIP string
	framework.Eventually(t, 10*time.Minute, "worker "+lost+" Ready again in a new launcher Pod", func() error {
		v := &v1.VirtualMachineInstance{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lost}, v); err != nil {
			return err
		}
		if v.UID == vmi.UID || v.Status.Phase != v1.Running {
			return fmt.Errorf("VMI %s %s", v.UID, v.Status.Phase)
		}
		newIP = f.LauncherPod(t, v).Status.PodIP
		n, err := hosted.CoreV1().Nodes().Get(ctx, lost, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := nodeAddress(n, corev1.NodeInternalIP); got != newIP {
			return fmt.Errorf("node at %s, launcher Pod at %s", got, newIP)
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue && cond.LastHeartbeatTime.After(lostAt) {
				return nil
			}
		}
		return fmt.Errorf("node not Ready since the launcher went")
	})
	t.Logf("worker %s Ready again at %s (was %s): %s", lost, newIP, launcher.Status.PodIP, time.Since(lostAt).Round(time.Second))
	script := fmt.Sprintf(`for i in $(seq 60); do b=$(printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 2 %s 8080 | tail -n 1) && [ -n "$b" ] && { echo "back $b"; exit; }; sleep 1; done; echo "back unreachable"`,
		keptWeb.Status.PodIP)
	back := hostedPod(t, hosted, shellPod("back", lost, image, nil, script))
	if logs := waitHostedPodDone(t, hosted, back.Name, 3*time.Minute); !strings.Contains(logs, "back from-"+kept) {
		t.Errorf("from the replaced worker %s, the Pod on %s at %s: %s", lost, kept, keptWeb.Status.PodIP, logs)
	}
	t.Logf("worker %s's launcher deleted -> its new Pods reach the other worker's: %s", lost, time.Since(lostAt).Round(time.Second))
}
