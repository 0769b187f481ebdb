package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestAttackRegistryPushFromPod: the testbed's registry at its cluster
// address serves pulls to Pods (an image by that name runs; the API
// answers) and refuses a tenant Pod's push (DENIED), which would
// otherwise replace images every node runs.
func TestAttackRegistryPushFromPod(t *testing.T) {
	t.Parallel()
	f := framework.New(t)
	ns := f.Namespace(t)
	ctx := context.Background()
	// The image by its cluster name: the nodes' containerd pulls it too.
	image := strings.Replace(registryImage(t, f, "tekvirt/busybox"), cluster.RegistryAddr, cluster.RegistryClusterAddr, 1)
	if !strings.HasPrefix(image, cluster.RegistryClusterAddr) {
		t.Fatalf("busybox image %s is not in the local registry", image)
	}
	base := "http://" + cluster.RegistryClusterAddr + "/v2/"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pusher"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "c", Image: image,
				Command: []string{"sh", "-c", fmt.Sprintf(`echo "pull: $(wget -q -O- %[1]stekvirt/busybox/tags/list 2>&1)"
echo "push: $(wget -S -q -O- --post-data x %[1]stekvirt/busybox/blobs/uploads/ 2>&1 | head -n 1)"
echo done`, base)},
			}},
		},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var logs string
	framework.Eventually(t, 2*time.Minute, "the Pod ran from the registry's cluster address", func() error {
		b, err := f.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		logs = string(b)
		if err != nil || !strings.Contains(logs, "done") {
			return fmt.Errorf("logs %q: %w", logs, err)
		}
		return nil
	})
	t.Logf("from the Pod:\n%s", logs)
	if !strings.Contains(logs, `pull: {"name":"tekvirt/busybox","tags":["latest"]}`) {
		t.Errorf("a Pod listing tekvirt/busybox's tags at %s: %q, want latest", base, logs)
	}
	if !strings.Contains(logs, "push: ") || !strings.Contains(logs, "403") {
		t.Errorf("a Pod pushing to the registry at %s: %q, want 403 (DENIED)", base, logs)
	}
}
