package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// TestGoldenNamespaceDataSource: an image imported into the golden
// namespace and published as a DataSource becomes Ready; an ordinary user
// (edit in their own namespace) cannot import into the golden namespace
// but clones from it through spec.sourceRef, byte for byte; a DataSource
// with an unsupported source is rejected naming it.
func TestGoldenNamespaceDataSource(t *testing.T) {
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	golden := ctrlconfig.GoldenNamespace
	name := "e2e-" + rand.String(5)
	size := corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("128Mi")}}
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: golden, Name: name},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{HTTP: &cdiv1.DataVolumeSourceHTTP{URL: serveGuest(t, f) + "/guest.qcow2.xz"}},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: golden, Name: name},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Name: name}}}}
	for _, o := range []client.Object{dv, ds} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	waitDataSource(t, c, ds, corev1.ConditionFalse) // importing
	waitDataSource(t, c, ds, corev1.ConditionTrue)

	ns := f.Namespace(t)
	user := userClient(t, f, ns, "e2e-user")
	steal := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: golden, Name: name + "-mine"},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}}, Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := user.Create(ctx, steal); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Errorf("a user created a DataVolume in the golden namespace: %v", err)
	}
	goldenNS := golden
	clone := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "from-golden"},
		Spec: cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: cdiv1.DataVolumeDataSource, Namespace: &goldenNS, Name: name},
			Storage: &cdiv1.StorageSpec{Resources: size}}}
	if err := user.Create(ctx, clone); err != nil {
		t.Fatalf("a user cloning from the golden namespace: %v", err)
	}
	waitDVPhase(t, c, clone, cdiv1.Succeeded)
	if a, b := volumeDisk(t, c, golden, name), volumeDisk(t, c, ns, clone.Name); !bytes.Equal(a, b) {
		t.Errorf("the clone (%d bytes) differs from the golden disk (%d bytes)", len(b), len(a))
	}

	snap := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snap"},
		Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{Snapshot: &cdiv1.DataVolumeSourceSnapshot{Name: "s"}}}}
	if err := c.Create(ctx, snap); err == nil || !strings.Contains(err.Error(), "spec.source.snapshot is not supported") {
		t.Errorf("a snapshot DataSource: err = %v", err)
	}
}

func waitDataSource(t *testing.T, c client.Client, ds *cdiv1.DataSource, want corev1.ConditionStatus) {
	t.Helper()
	framework.Eventually(t, 2*time.Minute, fmt.Sprintf("DataSource %s Ready=%s", ds.Name, want), func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(ds), ds); err != nil {
			return err
		}
		for _, cond := range ds.Status.Conditions {
			if cond.Type == cdiv1.DataSourceReady && cond.Status == want {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", ds.Status.Conditions)
	})
}

// userClient acts as user, given the built-in edit role in ns.
func userClient(t *testing.T, f *framework.Framework, ns, user string) client.Client {
	t.Helper()
	return boundClient(t, f, ns, user, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		&authorizationv1.ResourceAttributes{Namespace: ns, Verb: "create", Group: "kubevirt.io", Resource: "virtualmachineinstances"})
}

// boundClient binds role to user in ns and acts as user once the API
// server grants ra: its authorizer learns of a new binding from its
// informer, a moment later.
func boundClient(t *testing.T, f *framework.Framework, ns, user string, role rbacv1.RoleRef, ra *authorizationv1.ResourceAttributes) client.Client {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:  role,
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 30*time.Second, "the "+role.Name+" binding of "+user+" in effect", func() error {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: ra}}
		got, err := f.Kube.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if !got.Status.Allowed {
			return fmt.Errorf("not yet allowed: %s", got.Status.Reason)
		}
		return nil
	})
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cdiv1.AddToScheme, v1.AddToScheme, migrationsv1alpha1.AddToScheme, snapshotv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGoldenImagePipeline: the golden-image pipeline (tkn, as a user runs
// it) imports the guest over HTTP, boots a clone, checks it and publishes
// a Ready DataSource, leaving no VM; with a failing check it publishes
// nothing and deletes its import.
func TestGoldenImagePipeline(t *testing.T) {
	t.Parallel() // long and mostly waiting: see "Parallel" in doc.go
	f := framework.New(t)
	c := f.VMClient(t)
	ctx := context.Background()
	golden := ctrlconfig.GoldenNamespace
	url := serveGuest(t, f) + "/guest.qcow2.xz"
	run := func(name, script string, extra ...string) (string, error) {
		args := []string{"pipeline", "start", "golden-image", "-n", framework.CatalogNamespace, "-s", "golden-image-pipeline",
			"-p", "url=" + url, "-p", "name=" + name, "-p", "size=128Mi", "--use-param-defaults", "--showlog", "--exit-with-pipelinerun-error"}
		if script != "" {
			args = append(args, "-p", "script="+script)
		}
		cmd := exec.Command(f.Bin("tkn"), append(args, extra...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+f.Kubeconfig)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("tkn pipeline start golden-image (%s): %s", name, time.Since(start).Round(100*time.Millisecond))
		return string(out), err
	}
	good := "e2e-" + rand.String(5)
	t.Cleanup(func() { cleanGolden(c, good) })
	// Earlier imports of this DataSource, and one of another: with
	// importsToKeep 2 the run keeps its own and the newer earlier one.
	older, newer, other := earlierImport(t, c, good+"-old-1", good), earlierImport(t, c, good+"-old-2", good), earlierImport(t, c, good+"-other", "e2e-other")
	out, err := run(good, "", "-p", "importsToKeep=2")
	if err != nil {
		t.Fatalf("golden-image pipeline: %v\n%s", err, out)
	}
	for _, want := range []string{"Succeeded 100.0%", "ID=tekvirt-guest", "Linux 6.", "stopped", "deleted", "DataSource " + golden + "/" + good + ": Ready=True",
		"DataVolume " + golden + "/" + older + " deleted", "3 DataVolume(s) matching \"tekvirt.io/golden-image=" + good + "\" in " + golden + ", 1 deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("pipeline output lacks %q:\n%s", want, out)
		}
	}
	ds := &cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: golden, Name: good}}
	waitDataSource(t, c, ds, corev1.ConditionTrue)
	if p := ds.Status.Source.PVC; p == nil || !strings.HasPrefix(p.Name, good+"-golden-image-run-") {
		t.Errorf("the DataSource points at %+v", p)
	}
	framework.Eventually(t, time.Minute, "the oldest earlier import gone, the newer and the other DataSource's kept", func() error {
		for name, want := range map[string]bool{older: false, newer: true, other: true} {
			err := c.Get(ctx, client.ObjectKey{Namespace: golden, Name: name}, &cdiv1.DataVolume{})
			if (err == nil) != want {
				return fmt.Errorf("DataVolume %s: present %v, want %v", name, err == nil, want)
			}
		}
		return nil
	})
	var vms v1.VirtualMachineList
	if err := c.List(ctx, &vms, client.InNamespace(golden)); err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms.Items {
		if strings.HasPrefix(vm.Name, good) && vm.DeletionTimestamp == nil {
			t.Errorf("VM %s left behind", vm.Name)
		}
	}

	bad := "e2e-" + rand.String(5)
	t.Cleanup(func() { cleanGolden(c, bad) })
	if out, err := run(bad, "echo checking; exit 7"); err == nil || !strings.Contains(out, "checking") {
		t.Fatalf("a failing check passed the pipeline: %v\n%s", err, out)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: golden, Name: bad}, &cdiv1.DataSource{}); err == nil {
		t.Error("a failed check published its DataSource")
	}
	framework.Eventually(t, time.Minute, "the failed run's import deleted", func() error {
		var dvs cdiv1.DataVolumeList
		if err := c.List(ctx, &dvs, client.InNamespace(golden)); err != nil {
			return err
		}
		for _, dv := range dvs.Items {
			if strings.HasPrefix(dv.Name, bad) {
				return fmt.Errorf("DataVolume %s still there", dv.Name)
			}
		}
		return nil
	})
}

// earlierImport creates a blank DataVolume in the golden namespace labelled
// as an import of the DataSource dataSource, a second after the last one
// (creation times have whole seconds), and deletes it after the test.
func earlierImport(t *testing.T, c client.Client, name, dataSource string) string {
	t.Helper()
	time.Sleep(1100 * time.Millisecond)
	dv := &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ctrlconfig.GoldenNamespace, Name: name,
		Labels: map[string]string{"tekvirt.io/golden-image": dataSource}},
		Spec: cdiv1.DataVolumeSpec{Source: &cdiv1.DataVolumeSource{Blank: &cdiv1.DataVolumeBlankImage{}},
			Storage: &cdiv1.StorageSpec{Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("16Mi")}}}}}
	if err := c.Create(context.Background(), dv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), dv) })
	return name
}

// cleanGolden deletes what a golden-image run named name published.
func cleanGolden(c client.Client, name string) {
	ctx := context.Background()
	ds := &cdiv1.DataSource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ctrlconfig.GoldenNamespace, Name: name}, ds); err == nil {
		if p := ds.Spec.Source.PVC; p != nil {
			_ = c.Delete(ctx, &cdiv1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ctrlconfig.GoldenNamespace, Name: p.Name}})
		}
		_ = c.Delete(ctx, ds)
	}
}
