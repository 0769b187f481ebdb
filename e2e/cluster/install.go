package cluster

import (
	"context"
	"encoding/base64"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/tekvirt/tekvirt/catalog"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// install pushes the images and deploys Tekton and tekvirt into the cluster.
func (c *Cluster) install(ctx context.Context, b binaries) error {
	cfg, err := c.RESTConfig()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	k := &kube{cs: cs}
	a, err := newApplier(cfg)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := k.waitNodeReady(ctx, c.NodeName); err != nil {
		return err
	}
	c.progress("%-24s Ready (%s)", "node "+c.NodeName, since(start))
	images, err := c.pushImages(b)
	if err != nil {
		return err
	}
	if err := c.publishGuest(ctx); err != nil {
		return err
	}
	start = time.Now()
	if err := c.installTekton(ctx, a, k, images); err != nil {
		return err
	}
	c.progress("%-24s available in %s", "tekton pipelines", since(start))
	start = time.Now()
	if err := c.installTekvirt(ctx, a, k, images); err != nil {
		return err
	}
	c.progress("%-24s available in %s", "tekvirt controller", since(start))
	return nil
}

// installTekvirt applies the task ClusterRoles, the controller and the
// default HyperConverged, then waits until the catalog is installed.
func (c *Cluster) installTekvirt(ctx context.Context, a *applier, k *kube, images Images) error {
	roles, err := catalog.ClusterRoles()
	if err != nil {
		return err
	}
	if err := a.apply(ctx, roles); err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	for _, f := range append(append([]string{}, ctrlconfig.Files...), ctrlconfig.DefaultHyperConverged) {
		data, err := fs.ReadFile(ctrlconfig.FS, f)
		if err != nil {
			return err
		}
		resolved, err := images.Resolve(string(data))
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		docs, err := decodeManifests([]byte(resolved))
		if err != nil {
			return fmt.Errorf("decoding %s: %w", f, err)
		}
		extra, err := c.adjust(f, docs)
		if err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		objs = append(append(objs, docs...), extra...)
	}
	if err := a.apply(ctx, objs); err != nil {
		return err
	}
	if err := k.waitDeployment(ctx, ctrlconfig.Namespace, "tekvirt-controller"); err != nil {
		return err
	}
	for _, ds := range []string{ctrlconfig.HostpathDaemonSet, ctrlconfig.HandlerDaemonSet} {
		if err := k.waitDaemonSet(ctx, ctrlconfig.NodeNamespace, ds); err != nil {
			return err
		}
	}
	hc := objs[len(objs)-1]
	return waitAvailable(ctx, a, hc)
}

// adjust sets in the docs of manifest file what this cluster provides (the
// CA bundle of webhooks, the testbed's containerDisk cap) and returns the
// objects to apply right after them: the serving certificates' Secrets,
// signed by the cluster CA, after their namespaces.
func (c *Cluster) adjust(file string, docs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	switch file {
	case ctrlconfig.MutatingWebhookFile, ctrlconfig.ValidatingWebhookFile, ctrlconfig.APIServiceFile:
		return nil, c.setCABundle(docs)
	case "manager/namespace.yaml":
		secret, err := c.tlsSecret("webhook-serving", ctrlconfig.WebhookSecret, ctrlconfig.Namespace)
		return []*unstructured.Unstructured{secret}, err
	case "node/namespace.yaml":
		secret, err := c.tlsSecret("handler-serving", ctrlconfig.HandlerCertSecret, ctrlconfig.NodeNamespace)
		return []*unstructured.Unstructured{secret}, err
	case "handler/daemonset.yaml":
		return nil, setArg(docs[0], "--container-disk-max-bytes", strconv.Itoa(ContainerDiskMaxBytes))
	}
	return nil, nil
}

// tlsSecret holds the serving certificate pki/<file>.crt, signed by the
// cluster CA: the webhooks' and API's, and the handlers' exec endpoint's.
func (c *Cluster) tlsSecret(file, name, ns string) (*unstructured.Unstructured, error) {
	crt, err := os.ReadFile(filepath.Join(c.pkiDir(), file+".crt"))
	if err != nil {
		return nil, err
	}
	key, err := os.ReadFile(filepath.Join(c.pkiDir(), file+".key"))
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data": map[string]any{
			"tls.crt": base64.StdEncoding.EncodeToString(crt),
			"tls.key": base64.StdEncoding.EncodeToString(key),
		},
	}}, nil
}

// setCABundle makes the API server trust the cluster CA, which signed the
// webhook's certificate, when it calls the webhooks or APIService in docs.
func (c *Cluster) setCABundle(docs []*unstructured.Unstructured) error {
	ca, err := os.ReadFile(filepath.Join(c.pkiDir(), "ca.crt"))
	if err != nil {
		return err
	}
	for _, d := range docs {
		if d.GetKind() == "APIService" {
			if err := unstructured.SetNestedField(d.Object, base64.StdEncoding.EncodeToString(ca), "spec", "caBundle"); err != nil {
				return err
			}
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(d.Object, "webhooks")
		for _, h := range hooks {
			if err := unstructured.SetNestedField(h.(map[string]any), base64.StdEncoding.EncodeToString(ca), "clientConfig", "caBundle"); err != nil {
				return err
			}
		}
		if err := unstructured.SetNestedSlice(d.Object, hooks, "webhooks"); err != nil {
			return err
		}
	}
	return nil
}

// setArg replaces the value of flag (written --flag=value) in the first
// container of a workload's Pod template.
func setArg(workload *unstructured.Unstructured, flag, value string) error {
	containers, _, _ := unstructured.NestedSlice(workload.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return fmt.Errorf("%s %s has no containers", workload.GetKind(), workload.GetName())
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	found := false
	for i, a := range args {
		if strings.HasPrefix(a, flag+"=") {
			args[i], found = flag+"="+value, true
		}
	}
	if !found {
		return fmt.Errorf("%s %s has no %s argument", workload.GetKind(), workload.GetName(), flag)
	}
	if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(workload.Object, containers, "spec", "template", "spec", "containers")
}

var hyperConvergedGVR = schema.GroupVersionResource{Group: "hco.kubevirt.io", Version: "v1beta1", Resource: "hyperconvergeds"}

// waitAvailable waits for the HyperConverged to report Available=True for
// its current generation, and reports its message otherwise.
func waitAvailable(ctx context.Context, a *applier, hc *unstructured.Unstructured) error {
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
			return m["status"] == "True" && gen == got.GetGeneration(), nil
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("HyperConverged %s/%s not Available: %s (kubectl -n %s logs deploy/tekvirt-controller)", hc.GetNamespace(), hc.GetName(), last, hc.GetNamespace())
	}
	return nil
}
