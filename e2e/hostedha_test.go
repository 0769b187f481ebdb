package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// controlPlaneComponents are the Deployments of a hosted control plane.
var controlPlaneComponents = []string{hostedcluster.APIServerDeployment, hostedcluster.ControllerManagerDeployment, hostedcluster.SchedulerDeployment}

// controlPlaneReady says why the control plane in ns does not run n ready
// replicas of etcd and of each Deployment, or nil.
func controlPlaneReady(ctx context.Context, f *framework.Framework, ns string, n int32) error {
	sts, err := f.Kube.AppsV1().StatefulSets(ns).Get(ctx, hostedcluster.EtcdStatefulSet, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if *sts.Spec.Replicas != n || sts.Status.ReadyReplicas != n {
		return fmt.Errorf("etcd: %d/%d ready, want %d", sts.Status.ReadyReplicas, *sts.Spec.Replicas, n)
	}
	for _, name := range controlPlaneComponents {
		d, err := f.Kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if *d.Spec.Replicas != n || d.Status.ReadyReplicas != n || d.Status.UpdatedReplicas != n || d.Status.Replicas != n {
			return fmt.Errorf("%s: %d/%d ready (%d Pods), want %d", name, d.Status.ReadyReplicas, *d.Spec.Replicas, d.Status.Replicas, n)
		}
	}
	return nil
}

// checkHighlyAvailable: the control plane in ns runs three of everything,
// each Deployment's replicas on more than one node where there are
// several (etcd's members go where the default class, which binds at
// once, put their volumes).
func checkHighlyAvailable(t *testing.T, f *framework.Framework, ns string) {
	t.Helper()
	ctx := context.Background()
	if err := controlPlaneReady(ctx, f, ns, 3); err != nil {
		t.Fatalf("HighlyAvailable control plane: %v", err)
	}
	if len(f.Nodes(t)) < 2 {
		return
	}
	for _, app := range controlPlaneComponents {
		pods, err := f.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			t.Fatal(err)
		}
		nodes := map[string]int{}
		for _, p := range pods.Items {
			nodes[p.Spec.NodeName]++
		}
		if len(nodes) < 2 {
			t.Errorf("%s: every replica on one node: %v", app, nodes)
		}
	}
}

// pollHostedAPI reads a namespace of the hosted API at server (as token's
// user) five times a second until the returned stop is called, which
// reports how many requests were made and the failures.
func pollHostedAPI(t *testing.T, server, token string) (stop func() (int, []string)) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: server, BearerToken: token, Timeout: 5 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		n      int
		failed []string
		done   = make(chan struct{})
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			_, err := cs.CoreV1().Namespaces().Get(context.Background(), "default", metav1.GetOptions{})
			mu.Lock()
			n++
			if err != nil {
				failed = append(failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			}
			mu.Unlock()
		}
	}()
	var once sync.Once
	stop = func() (int, []string) {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return n, failed
	}
	t.Cleanup(func() { stop() })
	return stop
}
