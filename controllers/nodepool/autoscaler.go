package nodepool

import (
	"context"
	"fmt"
	"sync"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tekvirt/tekvirt/controllers/nodepool/autoscale"
)

// The cluster-autoscaler's defaults, which HostedCluster
// spec.autoscaling.scaleDown overrides.
const (
	defaultUnneeded  = 10 * time.Minute
	defaultThreshold = 0.5
)

// unneededTimes remembers, per NodePool, since when each worker has been
// unneeded (in memory, as the cluster-autoscaler keeps it: a restart starts
// the wait again).
type unneededTimes struct {
	mu sync.Mutex
	m  map[types.NamespacedName]map[string]time.Time
}

func (u *unneededTimes) get(k types.NamespacedName) map[string]time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.m[k]
}

func (u *unneededTimes) set(k types.NamespacedName, v map[string]time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = map[types.NamespacedName]map[string]time.Time{}
	}
	u.m[k] = v
}

// scaleDownSettings are the HostedCluster's scale-down rules.
func scaleDownSettings(cluster *hyperv1.HostedCluster) (enabled bool, unneeded time.Duration, threshold float64) {
	a := cluster.Spec.Autoscaling
	enabled, unneeded, threshold = a.Scaling != hyperv1.ScaleUpOnly, defaultUnneeded, defaultThreshold
	if sd := a.ScaleDown; sd != nil {
		if sd.UnneededDurationSeconds != nil {
			unneeded = time.Duration(*sd.UnneededDurationSeconds) * time.Second
		}
		if sd.UtilizationThresholdPercent != nil {
			threshold = float64(*sd.UtilizationThresholdPercent) / 100
		}
	}
	return enabled, unneeded, threshold
}

func resourcesOf(l corev1.ResourceList) autoscale.Resources {
	return autoscale.Resources{CPU: l.Cpu().MilliValue(), Memory: l.Memory().Value()}
}

// podOf is what the rules need of p: its containers' requests, whether it
// counts (not a DaemonSet's or static Pod) and whether a controller owns it.
func podOf(p *corev1.Pod) autoscale.Pod {
	var req autoscale.Resources
	for _, c := range p.Spec.Containers {
		r := resourcesOf(c.Resources.Requests)
		req.CPU, req.Memory = req.CPU+r.CPU, req.Memory+r.Memory
	}
	return autoscale.Pod{Name: p.Namespace + "/" + p.Name, Requests: req, Ignored: !evictable(p), Unowned: metav1.GetControllerOf(p) == nil}
}

func unschedulable(p *corev1.Pod) bool {
	if p.Spec.NodeName != "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// autoscaleInput gathers the pool's workers and the hosted cluster's Pods
// for the rules. A new worker is assumed as large as a Ready one of the
// pool, or, before any is, as the pool's compute.
func autoscaleInput(ctx context.Context, np *hyperv1.NodePool, cluster *hyperv1.HostedCluster, hosted kubernetes.Interface, ms []Machine) (autoscale.Input, error) {
	nodes, err := hosted.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return autoscale.Input{}, fmt.Errorf("listing hosted nodes: %w", err)
	}
	pods, err := hosted.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return autoscale.Input{}, fmt.Errorf("listing hosted Pods: %w", err)
	}
	in := autoscale.Input{Min: int(np.Spec.AutoScaling.Min), Max: int(np.Spec.AutoScaling.Max), Template: computeOf(np)}
	in.ScaleDown, in.UnneededTime, in.Threshold = scaleDownSettings(cluster)
	workers := map[string]*autoscale.Node{}
	for _, m := range ms {
		if m.Removing {
			continue
		}
		in.Current++
		if !m.NodeReady {
			in.Upcoming++
		}
		workers[m.Name] = &autoscale.Node{Name: m.Name}
	}
	if t, ok := fillNodes(workers, nodes.Items); ok {
		in.Template = t
	}
	in.Pending = placePods(workers, pods.Items)
	for _, m := range ms {
		if w := workers[m.Name]; w != nil {
			in.Nodes = append(in.Nodes, *w)
		}
	}
	return in, nil
}

// fillNodes sets the workers' allocatable resources and readiness from
// their hosted nodes, and returns a Ready one's allocatable, if any.
func fillNodes(workers map[string]*autoscale.Node, nodes []corev1.Node) (autoscale.Resources, bool) {
	var template autoscale.Resources
	found := false
	for i := range nodes {
		n := &nodes[i]
		w := workers[n.Name]
		if w == nil {
			continue
		}
		w.Allocatable, w.Ready = resourcesOf(n.Status.Allocatable), nodeReady(n) && !n.Spec.Unschedulable
		if w.Ready && !found {
			template, found = w.Allocatable, true
		}
	}
	return template, found
}

// placePods puts the running Pods on their workers and returns the
// unschedulable ones.
func placePods(workers map[string]*autoscale.Node, pods []corev1.Pod) []autoscale.Pod {
	var pending []autoscale.Pod
	for i := range pods {
		p := &pods[i]
		if unschedulable(p) {
			pending = append(pending, podOf(p))
			continue
		}
		if w := workers[p.Spec.NodeName]; w != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			w.Pods = append(w.Pods, podOf(p))
		}
	}
	return pending
}

// computeOf is a worker's size from the pool's compute.
func computeOf(np *hyperv1.NodePool) autoscale.Resources {
	cores, memory := defaultCores, defaultMemory
	if c := kubevirtPlatform(np).Compute; c != nil {
		if c.Cores != nil {
			cores = *c.Cores
		}
		if c.Memory != nil {
			memory = *c.Memory
		}
	}
	return autoscale.Resources{CPU: int64(cores) * 1000, Memory: memory.Value()}
}
