package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// upExtraNodes starts the extra nodes Up was asked for and removes the ones
// a previous Up made beyond them (their Node objects too).
func (c *Cluster) upExtraNodes(ctx context.Context, b binaries) error {
	if c.Nodes > maxNodes {
		return fmt.Errorf("--nodes %d: at most %d", c.Nodes, maxNodes)
	}
	want := c.extraIndexes()
	for _, i := range want {
		n := c.extraNode(i)
		if err := c.setUpNode(n); err != nil {
			return err
		}
		for _, p := range c.nodeProcesses(b, n) {
			if err := c.ensure(ctx, p); err != nil {
				return err
			}
		}
	}
	for _, i := range c.madeIndexes() {
		if slices.Contains(want, i) {
			continue
		}
		n := c.extraNode(i)
		if err := c.removeExtraNode(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

// downExtraNode stops an extra node's processes and its pods' containers,
// then removes its namespaces and links. Its state stays for the next Up.
func (c *Cluster) downExtraNode(n node) error {
	procs := c.nodeProcesses(c.knownBinaries(), n)
	var errs []error
	for i := len(procs) - 1; i >= 0; i-- {
		if strings.HasSuffix(procs[i].name, "-containerd") {
			errs = append(errs, c.stopContainers(c.containerdSocketOf(n)))
		}
		errs = append(errs, c.stop(procs[i]))
	}
	errs = append(errs, c.tearDownNode(n))
	return errors.Join(errs...)
}

// removeExtraNode takes a node out of the cluster for good: its processes,
// namespaces, state and Node object.
func (c *Cluster) removeExtraNode(ctx context.Context, n node) error {
	if err := c.downExtraNode(n); err != nil {
		return err
	}
	_, cs, err := c.clientset()
	if err != nil {
		return err
	}
	if err := cs.CoreV1().Nodes().Delete(ctx, n.name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Node %s: %w", n.name, err)
	}
	// The node's Pods would still count as ready until the pod garbage
	// collector finds them orphaned (about a minute), and a Service would
	// still send to their addresses: they go now, so that their workloads
	// are placed again before install waits for them.
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.name})
	if err != nil {
		return fmt.Errorf("listing the Pods of node %s: %w", n.name, err)
	}
	for _, p := range pods.Items {
		err := cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Pod %s/%s of node %s: %w", p.Namespace, p.Name, n.name, err)
		}
	}
	for _, d := range []string{c.etc(n, ""), c.runDir(n), c.dataDir(n), nodeDir(n.name)} {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("removing %s: %w", d, err)
		}
	}
	for _, f := range []string{"kubelet", "kubelet-serving"} {
		for _, ext := range []string{".crt", ".key"} {
			_ = os.Remove(c.path("pki", n.proc(f)+ext))
		}
	}
	c.progress("%-24s removed (Up asked for %s nodes)", "node "+n.name, strconv.Itoa(c.Nodes))
	return nil
}
