package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
)

// install pushes the images and deploys Tekton and tekvirt into the cluster.
func (c *Cluster) install(ctx context.Context, b binaries) error {
	cfg, cs, err := c.clientset()
	if err != nil {
		return err
	}
	k := &kube{cs: cs}
	a, err := newApplier(cfg)
	if err != nil {
		return err
	}
	for _, n := range c.nodes() {
		start := time.Now()
		if err := k.waitNodeReady(ctx, n.name); err != nil {
			return err
		}
		c.progress("%-24s Ready (%s)", "node "+n.name, since(start))
	}
	images, err := c.pushImages(ctx, b, RegistryAddr)
	if err != nil {
		return err
	}
	if err := c.publishGuest(ctx); err != nil {
		return err
	}
	start := time.Now()
	if err := c.installDNS(ctx, a, k, images); err != nil {
		return err
	}
	if err := c.installRegistryService(ctx, a); err != nil {
		return err
	}
	c.progress("%-24s available in %s", "cluster DNS", since(start))
	start = time.Now()
	if err := c.installNetworkPolicy(ctx, a, k, images); err != nil {
		return err
	}
	c.progress("%-24s ready on every node in %s", "NetworkPolicy agent", since(start))
	start = time.Now()
	if err := c.installTekton(ctx, a, k, images); err != nil {
		return err
	}
	c.progress("%-24s available in %s", "tekton pipelines", since(start))
	start = time.Now()
	if err := c.installTekvirt(ctx, a, k, images); err != nil {
		return err
	}
	c.progress("%-24s available in %s", "tekvirt", since(start))
	return nil
}

// ReleaseDir is where `up` renders the release it installs.
func (c *Cluster) ReleaseDir() string { return c.path("data", "release") }

// installTekvirt installs the release as a user does: it renders the two
// files for the pushed images and applies them (server-side, as `kubectl
// apply --server-side -f`), then waits until the operator reports every
// component ready at the pushed images and the catalog installed.
func (c *Cluster) installTekvirt(ctx context.Context, a *applier, k *kube, images Images) error {
	if err := renderRelease(images, c.ReleaseDir()); err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, f := range []string{ReleaseOperatorFile, ReleaseCRFile} {
		data, err := os.ReadFile(filepath.Join(c.ReleaseDir(), f))
		if err != nil {
			return err
		}
		docs, err := ctrlconfig.Decode(data)
		if err != nil {
			return fmt.Errorf("decoding %s: %w", f, err)
		}
		objs = append(objs, docs...)
	}
	if err := a.asKubectl().apply(ctx, objs); err != nil {
		return err
	}
	// Low enough for a test to cross quickly (the handlers' default is
	// 20 GiB): set on the HyperConverged as an admin would, by its own
	// field manager, so that re-applying the release keeps it.
	hc := objs[len(objs)-1]
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, hyperconverged.ContainerDiskMaxBytesAnnotation, strconv.Itoa(ContainerDiskMaxBytes))
	if _, err := a.dyn.Resource(hyperConvergedGVR).Namespace(hc.GetNamespace()).Patch(ctx, hc.GetName(), types.MergePatchType, []byte(patch),
		metav1.PatchOptions{FieldManager: "tekvirt"}); err != nil {
		return fmt.Errorf("annotating HyperConverged %s/%s: %w", hc.GetNamespace(), hc.GetName(), err)
	}
	if err := k.waitDeployment(ctx, ctrlconfig.Namespace, ctrlconfig.OperatorDeployment); err != nil {
		return err
	}
	deployed := hyperconverged.Images{}
	for _, p := range hyperconverged.Programs {
		deployed[p] = images[p]
	}
	return waitAvailable(ctx, a, hc, deployed.Version())
}

var hyperConvergedGVR = schema.GroupVersionResource{Group: "hco.kubevirt.io", Version: "v1beta1", Resource: "hyperconvergeds"}

// waitAvailable waits for the HyperConverged to report Available=True for
// its current generation with the components at version (so that a status
// written before an upgrade does not count), and reports its message
// otherwise.
func waitAvailable(ctx context.Context, a *applier, hc *unstructured.Unstructured, version string) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := a.dyn.Resource(hyperConvergedGVR).Namespace(hc.GetNamespace()).Get(ctx, hc.GetName(), metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] != "Available" {
				continue
			}
			last = fmt.Sprintf("%v: %v", m["reason"], m["message"])
			gen, _ := m["observedGeneration"].(int64)
			versions, _, _ := unstructured.NestedSlice(got.Object, "status", "versions")
			current := slices.ContainsFunc(versions, func(v any) bool {
				vm, _ := v.(map[string]any)
				return vm["name"] == hyperconverged.VersionName && vm["version"] == version
			})
			return m["status"] == "True" && gen == got.GetGeneration() && current, nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("HyperConverged %s/%s not Available: %s (kubectl -n %s logs deploy/%s)", hc.GetNamespace(), hc.GetName(), last, ctrlconfig.Namespace, ctrlconfig.OperatorDeployment)
	}
	return nil
}
