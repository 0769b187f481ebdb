package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tekvirt/tekvirt/e2e/framework"
)

// prepull has every node of the cluster of kubeconfig pull images before
// the suite starts, as the suite's own --prepull-images does for its
// list (which names images the selection never pulls): a hosted worker
// unpacks an image on an emulated CPU in minutes (a 35 MB one took 4m30s),
// which the tests would count against their Pods' start. A DaemonSet with
// a container per image (each shell image sleeping, the pause image as it
// is), waited for until every container runs on every node.
func prepull(t *testing.T, kubeconfig string, images []string) {
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	const ns = "tekvirt-prepull"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Logf("deleting namespace %s: %v", ns, err)
		}
	}()
	labels := map[string]string{"app": "prepull"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "prepull"}, Spec: appsv1.DaemonSetSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
		}},
	}}
	for i, img := range images {
		c := corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img, ImagePullPolicy: corev1.PullIfNotPresent}
		if !strings.Contains(img, "/pause:") {
			c.Command = []string{"sh", "-c", "exec sleep 86400"}
		}
		ds.Spec.Template.Spec.Containers = append(ds.Spec.Template.Spec.Containers, c)
	}
	if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.Eventually(t, 40*time.Minute, fmt.Sprintf("%d images on every node", len(images)), func() error {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var waiting []string
		running := 0
		for _, p := range pods.Items {
			for _, s := range p.Status.ContainerStatuses {
				if s.State.Running != nil {
					running++
				} else {
					waiting = append(waiting, p.Spec.NodeName+":"+s.Image)
				}
			}
		}
		if want := len(nodes.Items) * len(images); running < want {
			return fmt.Errorf("%d of %d containers running; waiting: %v", running, want, waiting)
		}
		return nil
	})
	t.Logf("pre-pulled %d images on every node: %s", len(images), time.Since(start).Round(time.Second))
}
