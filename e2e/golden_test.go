package e2e

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
	if _, err := f.Kube.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := cdiv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(f.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
