package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubevirtv1 "kubevirt.io/api/core/v1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/controllers/hyperconverged"
	"github.com/tekvirt/tekvirt/e2e/cluster"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// imageRef is an image, or an --*-image flag's value, in the release;
// byDigest is how each must end.
var (
	imageRef = regexp.MustCompile(`(?:image:\s*|-image=)(\S+)`)
	byDigest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
)

// TestReleaseNamesImagesByDigestAndAppliesTwiceAsNoOp: the release `up`
// installed names every image by digest, and applying it again as a user
// does (`kubectl apply --server-side -f`, twice) changes nothing the second
// time and rolls out nothing.
func TestReleaseNamesImagesByDigestAndAppliesTwiceAsNoOp(t *testing.T) {
	f := framework.New(t)
	dir := (&cluster.Cluster{Home: f.Home}).ReleaseDir()
	operator := filepath.Join(dir, cluster.ReleaseOperatorFile)
	data, err := os.ReadFile(operator)
	if err != nil {
		t.Fatal(err)
	}
	refs := 0
	for sc := bufio.NewScanner(strings.NewReader(string(data))); sc.Scan(); {
		for _, m := range imageRef.FindAllStringSubmatch(sc.Text(), -1) {
			refs++
			if !byDigest.MatchString(m[1]) {
				t.Errorf("image %s in the release is not named by digest", m[1])
			}
		}
	}
	if refs < 6 || strings.Contains(string(data), "ko://") {
		t.Errorf("%d image references in the release, ko:// left: %v", refs, strings.Contains(string(data), "ko://"))
	}
	apply := func() map[string]string {
		t.Helper()
		cmd := exec.Command(f.Bin("kubectl"), "apply", "--server-side", "-f", operator, "-f", filepath.Join(dir, cluster.ReleaseCRFile), "-o", "name")
		cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("kubectl apply of the release: %v\n%s", err, out)
		}
		return resourceVersions(t, f, data)
	}
	controller := &appsv1.Deployment{}
	if err := f.VMClient(t).Get(context.Background(), client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: "tekvirt-controller"}, controller); err != nil {
		t.Fatal(err)
	}
	first := apply()
	second := apply()
	for obj, rv := range first {
		if second[obj] != rv {
			t.Errorf("%s changed on the second apply (resourceVersion %s -> %s)", obj, rv, second[obj])
		}
	}
	after := &appsv1.Deployment{}
	if err := f.VMClient(t).Get(context.Background(), client.ObjectKey{Namespace: ctrlconfig.Namespace, Name: "tekvirt-controller"}, after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != controller.Generation {
		t.Errorf("applying the release rolled the controller out again (generation %d -> %d)", controller.Generation, after.Generation)
	}
}

// resourceVersions reads, for each object of a manifest, its
// resourceVersion in the cluster.
func resourceVersions(t *testing.T, f *framework.Framework, manifest []byte) map[string]string {
	t.Helper()
	dyn, err := dynamic.NewForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	objs, err := ctrlconfig.Decode(manifest)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, u := range objs {
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(m.Resource).Namespace(u.GetNamespace()).Get(context.Background(), u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		out[fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())] = got.GetResourceVersion()
	}
	return out
}

// TestOperatorRestoresDeletedComponents deletes components the operator
// deployed (a webhook configuration, a DaemonSet, the CA bundle): each comes
// back and the HyperConverged is Available again.
func TestOperatorRestoresDeletedComponents(t *testing.T) {
	f := framework.New(t)
	dyn, err := dynamic.NewForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	victims := []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{
		{admissionv1.SchemeGroupVersion.WithResource("validatingwebhookconfigurations"), "", "tekvirt-vm-validator"},
		{appsv1.SchemeGroupVersion.WithResource("daemonsets"), ctrlconfig.NodeNamespace, ctrlconfig.HostpathDaemonSet},
		{corev1.SchemeGroupVersion.WithResource("configmaps"), ctrlconfig.Namespace, "tekvirt-ca"},
	}
	for _, v := range victims {
		r := dyn.Resource(v.gvr).Namespace(v.ns)
		before, err := r.Get(ctx, v.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if before.GetLabels()[hyperconverged.ManagedByLabel] != hyperconverged.ManagedBy {
			t.Errorf("%s %s is not labelled as the operator's", v.gvr.Resource, v.name)
		}
		if err := r.Delete(ctx, v.name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, time.Minute, v.gvr.Resource+" "+v.name+" put back", func() error {
			got, err := r.Get(ctx, v.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.GetUID() == before.GetUID() {
				return fmt.Errorf("the deleted object is still there")
			}
			return nil
		})
	}
	framework.Eventually(t, 2*time.Minute, "HyperConverged Available again", func() error {
		hc, err := dyn.Resource(hcoGVR).Namespace(ctrlconfig.Namespace).Get(ctx, "kubevirt-hyperconverged", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(hc.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Available" {
				if m["status"] != "True" {
					return fmt.Errorf("Available %v: %v", m["status"], m["message"])
				}
				return nil
			}
		}
		return fmt.Errorf("no Available condition")
	})
}

// TestHyperConvergedDeletionRefusedWhileVMsExist: deleting the
// HyperConverged (as a server-side dry run, so nothing is removed) while a
// VirtualMachine exists is refused with a message naming it, as HCO's
// webhook refuses it.
func TestHyperConvergedDeletionRefusedWhileVMsExist(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	vm := framework.GuestVM(ns, "keeps-hco", framework.GuestImage, kubevirtv1.RunStrategyHalted)
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(f.Config)
	if err != nil {
		t.Fatal(err)
	}
	err = dyn.Resource(hcoGVR).Namespace(ctrlconfig.Namespace).Delete(ctx, "kubevirt-hyperconverged", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err == nil || !strings.Contains(err.Error(), "cannot be deleted while virtual machines exist") || !strings.Contains(err.Error(), "VirtualMachine "+ns+"/keeps-hco") {
		t.Fatalf("deleting the HyperConverged with a VM: err = %v, want a refusal naming VirtualMachine %s/keeps-hco", err, ns)
	}
}
