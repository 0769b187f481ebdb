package hyperconverged

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubevirtv1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
	nacv1 "github.com/tekvirt/tekvirt/controllers/apis/networkaddons/v1"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

const stepImage = "127.0.0.1:5000/tekvirt/tekvirt-step@sha256:1111111111111111111111111111111111111111111111111111111111111111"

// startController runs the reconciler (catalog only) against a real API
// server holding the HyperConverged and Tekton Task and Pipeline CRDs, and
// returns a client of it.
func startController(t *testing.T) client.Client {
	t.Helper()
	return startReconciler(t, &Reconciler{StepImage: stepImage})
}

// startReconciler runs r, its Client set, as startController describes.
func startReconciler(t *testing.T, r *Reconciler) client.Client {
	t.Helper()
	tekton := testenv.ModuleDir(t, "github.com/tektoncd/pipeline")
	cfg := testenv.Start(t, filepath.Join("..", "config", "crd"), filepath.Join(tekton, "config", "300-crds", "300-task.yaml"),
		filepath.Join(tekton, "config", "300-crds", "300-pipeline.yaml"))
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := hcov1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := nacv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := testenv.StartManager(t, cfg, scheme, func(mgr ctrl.Manager) error {
		r.Client, r.Reader = mgr.GetClient(), mgr.GetAPIReader()
		return r.SetupWithManager(mgr)
	})
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt-system"}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func task(name, ns string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("tekton.dev/v1")
	u.SetKind("Task")
	u.SetName(name)
	u.SetNamespace(ns)
	return u
}

func condition(c client.Client, key client.ObjectKey, typ string) (*metav1.Condition, *hcov1beta1.HyperConverged, error) {
	hc := &hcov1beta1.HyperConverged{}
	if err := c.Get(context.Background(), key, hc); err != nil {
		return nil, nil, err
	}
	cond := meta.FindStatusCondition(hc.Status.Conditions, typ)
	if cond == nil {
		return nil, hc, fmt.Errorf("no %s condition yet", typ)
	}
	return cond, hc, nil
}

func TestReconcilerInstallsRestoresAndRemovesCatalog(t *testing.T) {
	c := startController(t)
	ctx := context.Background()
	// A binding from before the task roles took kubevirt-tekton-tasks'
	// names: its roleRef cannot change, so the operator replaces it.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tekvirt"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tekvirt", Name: "generate-ssh-keys-task"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tekvirt-generate-ssh-keys-task"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "generate-ssh-keys-task", Namespace: "tekvirt"}}}); err != nil {
		t.Fatal(err)
	}
	// Two nodes VMs can run on: evictionStrategy defaults to LiveMigrate.
	for _, name := range []string{"node1", "node2"} {
		if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	hc := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Name: SingletonName, Namespace: "tekvirt-system"}}
	if err := c.Create(ctx, hc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(hc)
	testenv.Eventually(t, "evictionStrategy defaulted", func() error {
		got := &hcov1beta1.HyperConverged{}
		if err := c.Get(ctx, key, got); err != nil {
			return err
		}
		if got.Spec.EvictionStrategy == nil || *got.Spec.EvictionStrategy != kubevirtv1.EvictionStrategyLiveMigrate {
			return fmt.Errorf("evictionStrategy %v", got.Spec.EvictionStrategy)
		}
		return nil
	})
	testenv.Eventually(t, "HyperConverged Available", func() error {
		cond, got, err := condition(c, key, ConditionAvailable)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != got.Generation {
			return fmt.Errorf("Available = %s (%s)", cond.Status, cond.Message)
		}
		return nil
	})
	installed := task("generate-ssh-keys", "tekvirt")
	if err := c.Get(ctx, client.ObjectKeyFromObject(installed), installed); err != nil {
		t.Fatalf("catalog Task not installed: %v", err)
	}
	steps, _, _ := unstructured.NestedSlice(installed.Object, "spec", "steps")
	if img := steps[0].(map[string]any)["image"]; img != stepImage {
		t.Fatalf("Task step image = %v, want %s", img, stepImage)
	}
	pl := &unstructured.Unstructured{}
	pl.SetAPIVersion("tekton.dev/v1")
	pl.SetKind("Pipeline")
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tekvirt", Name: "vm-test"}, pl); err != nil {
		t.Fatalf("catalog Pipeline not installed: %v", err)
	}
	var prb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tekvirt", Name: "vm-test-pipeline-execute-in-vm"}, &prb); err != nil || prb.Subjects[0].Name != "vm-test-pipeline" {
		t.Fatalf("pipeline ServiceAccount's binding to execute-in-vm's role: %+v %v", prb, err)
	}
	var rb rbacv1.RoleBinding
	if err := c.Get(ctx, client.ObjectKey{Namespace: "tekvirt", Name: "generate-ssh-keys-task"}, &rb); err != nil {
		t.Fatalf("task RoleBinding: %v", err)
	}
	if rb.RoleRef.Name != "generate-ssh-keys-task" || rb.Subjects[0].Name != "generate-ssh-keys-task" {
		t.Fatalf("RoleBinding = %+v", rb)
	}

	uid := installed.GetUID()
	if err := c.Delete(ctx, installed); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "deleted Task restored", func() error {
		got := task("generate-ssh-keys", "tekvirt")
		if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return err
		}
		if got.GetUID() == uid {
			return fmt.Errorf("old object still there")
		}
		return nil
	})

	commonTemplate := func() error {
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("template.openshift.io/v1")
		tmpl.SetKind("Template")
		return c.Get(ctx, client.ObjectKey{Namespace: hcov1beta1.DefaultCommonTemplatesNamespace, Name: "tekvirt-guest-server-tiny"}, tmpl)
	}
	testenv.Eventually(t, "common template installed", commonTemplate)
	if err := c.Delete(ctx, hc); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "catalog removed with the HyperConverged", func() error {
		if err := c.Get(ctx, key, &hcov1beta1.HyperConverged{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("HyperConverged still there: %w", err)
		}
		got := task("generate-ssh-keys", "tekvirt")
		if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Task still there: %w", err)
		}
		if err := commonTemplate(); !apierrors.IsNotFound(err) {
			return fmt.Errorf("common template still there: %w", err)
		}
		return nil
	})
}

func TestReconcilerHonorsNamespaceAndSingleton(t *testing.T) {
	c := startController(t)
	ctx := context.Background()
	ns, templatesNS := "custom-catalog", "custom-templates"
	hc := &hcov1beta1.HyperConverged{
		ObjectMeta: metav1.ObjectMeta{Name: SingletonName, Namespace: "tekvirt-system"},
		Spec:       hcov1beta1.HyperConvergedSpec{TektonPipelinesNamespace: &ns, CommonTemplatesNamespace: &templatesNS},
	}
	other := &hcov1beta1.HyperConverged{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: "tekvirt-system"}}
	for _, o := range []*hcov1beta1.HyperConverged{hc, other} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "catalog in the namespace of the spec", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "generate-ssh-keys"}, task("", ""))
	})
	testenv.Eventually(t, "common templates in the templates namespace of the spec", func() error {
		tmpl := &unstructured.Unstructured{}
		tmpl.SetAPIVersion("template.openshift.io/v1")
		tmpl.SetKind("Template")
		if err := c.Get(ctx, client.ObjectKey{Namespace: templatesNS, Name: "tekvirt-guest-server-tiny"}, tmpl); err != nil {
			return err
		}
		if tmpl.GetLabels()["template.kubevirt.io/type"] != "base" || tmpl.GetLabels()[ManagedByLabel] != ManagedBy {
			return fmt.Errorf("labels %v", tmpl.GetLabels())
		}
		rb := &rbacv1.RoleBinding{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: templatesNS, Name: TemplateReadersBinding}, rb); err != nil {
			return err
		}
		if rb.RoleRef.Name != CommonTemplatesReaderRole || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "system:authenticated" {
			return fmt.Errorf("binding %+v %+v", rb.RoleRef, rb.Subjects)
		}
		return nil
	})
	testenv.Eventually(t, "second HyperConverged Degraded", func() error {
		cond, got, err := condition(c, client.ObjectKeyFromObject(other), ConditionDegraded)
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionTrue || cond.Reason != ReasonNotSingleton {
			return fmt.Errorf("Degraded = %s/%s", cond.Status, cond.Reason)
		}
		if len(got.Finalizers) != 0 {
			return fmt.Errorf("the second HyperConverged got finalizers %v", got.Finalizers)
		}
		return nil
	})
}
