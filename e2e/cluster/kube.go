package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kube is a typed client of the local cluster with the waits Up needs.
type kube struct {
	cs kubernetes.Interface
}

// clientset is a client of the cluster with the admin identity.
func (c *Cluster) clientset() (*rest.Config, *kubernetes.Clientset, error) {
	cfg, err := c.RESTConfig()
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	return cfg, cs, err
}

// RESTConfig returns the admin client configuration of the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", c.Kubeconfig(), err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

func (k *kube) waitNodeReady(ctx context.Context, name string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := k.cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("%s: %s", c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready: %s (see the kubelet log)", name, last)
	}
	return nil
}

// waitDeployment waits until the deployment has an available replica of its
// current revision; on timeout it names the pods' waiting reasons.
func (k *kube) waitDeployment(ctx context.Context, ns, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return deploymentAvailable(d), nil
	})
	if err == nil {
		return nil
	}
	var problems string
	if d, err := k.cs.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		problems = err.Error()
	} else {
		problems = k.podProblems(ctx, ns, d.Spec.Selector)
	}
	return fmt.Errorf("deployment %s/%s not available: %s (kubectl -n %s logs deploy/%s)", ns, name, problems, ns, name)
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	if d.Status.ObservedGeneration < d.Generation {
		return false
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.UpdatedReplicas >= want && d.Status.AvailableReplicas >= want && d.Status.Replicas == d.Status.UpdatedReplicas
}

// podProblems summarises why the selected pods are not ready.
func (k *kube) podProblems(ctx context.Context, ns string, selector *metav1.LabelSelector) string {
	sel, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return err.Error()
	}
	pods, err := k.cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("pod %s %s", p.Name, p.Status.Phase))
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			switch {
			case cs.State.Waiting != nil:
				out = append(out, fmt.Sprintf("%s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message))
			case cs.State.Terminated != nil:
				out = append(out, fmt.Sprintf("%s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode))
			case !cs.Ready:
				out = append(out, cs.Name+" not ready")
			}
		}
	}
	if len(out) == 0 {
		return "no pods"
	}
	return strings.Join(out, "; ")
}
