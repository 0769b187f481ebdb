package modifydataobject

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	"github.com/tekvirt/tekvirt/tasks/kube"
)

const dsManifest = `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataSource
metadata: {name: fedora}
spec: {source: {pvc: {name: fedora-1}}}
`

func newClient(t *testing.T) client.Client {
	t.Helper()
	s, err := kube.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&cdiv1.DataVolume{}, &cdiv1.DataSource{}).Build()
}

func TestDecode(t *testing.T) {
	for name, tc := range map[string]struct{ manifest, want string }{
		"empty":         {"", "param manifest is empty"},
		"a VM":          {"apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: x}", `want kind DataVolume or DataSource`},
		"old version":   {"apiVersion: cdi.kubevirt.io/v1alpha1\nkind: DataVolume\nmetadata: {name: x}", "want cdi.kubevirt.io/v1beta1"},
		"unknown field": {"apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataSource\nmetadata: {name: x}\nspec: {source: {pvc: {name: a, color: red}}}", `unknown field "spec.source.pvc.color"`},
		"no name":       {"apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataSource\nspec: {}", "neither metadata.name nor metadata.generateName"},
	} {
		if _, err := Decode(tc.manifest); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
}

func TestCreateWaitReplaceDelete(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	// The DataSource controller's part: Ready shortly after creation.
	go func() {
		for range 100 {
			time.Sleep(10 * time.Millisecond)
			ds := &cdiv1.DataSource{}
			if c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "fedora"}, ds) == nil {
				ds.Status.Conditions = []cdiv1.DataSourceCondition{{Type: cdiv1.DataSourceReady, ConditionState: cdiv1.ConditionState{Status: corev1.ConditionTrue}}}
				if c.Status().Update(ctx, ds) == nil {
					return
				}
			}
		}
	}()
	var out bytes.Buffer
	p := Params{Manifest: dsManifest, DefaultNamespace: "ns", WaitForSuccess: true, Timeout: 5 * time.Second, Poll: 5 * time.Millisecond}
	res, err := Run(ctx, c, p, &out)
	if err != nil || res.Name != "fedora" || res.Namespace != "ns" || !strings.Contains(out.String(), "Ready=True") {
		t.Fatalf("Run = %+v, %v\n%s", res, err, out.String())
	}
	p.Manifest = strings.Replace(dsManifest, "fedora-1", "fedora-2", 1)
	p.WaitForSuccess = false
	if _, err := Run(ctx, c, p, &out); err == nil || !strings.Contains(err.Error(), "set allowReplace") {
		t.Errorf("existing without allowReplace: %v", err)
	}
	p.AllowReplace = true
	out.Reset()
	if _, err := Run(ctx, c, p, &out); err != nil || !strings.Contains(out.String(), "DataSource ns/fedora exists: spec replaced") {
		t.Fatalf("replace: %v\n%s", err, out.String())
	}
	ds := &cdiv1.DataSource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "fedora"}, ds); err != nil || ds.Spec.Source.PVC.Name != "fedora-2" {
		t.Fatalf("replaced DataSource: %+v, %v", ds.Spec, err)
	}
	if _, err := Run(ctx, c, Params{DeleteObject: true, DeleteObjectKind: "DataSource", DeleteObjectName: "fedora", DefaultNamespace: "ns", Poll: time.Millisecond}, &out); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "fedora"}, ds); err == nil {
		t.Error("the DataSource is still there")
	}
}

func TestFailedDataVolumeFailsTheStep(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	go func() {
		for range 100 {
			time.Sleep(10 * time.Millisecond)
			dv := &cdiv1.DataVolume{}
			if c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "disk"}, dv) == nil {
				dv.Status.Phase = cdiv1.Failed
				dv.Status.Conditions = []cdiv1.DataVolumeCondition{{Type: cdiv1.DataVolumeReady, Status: corev1.ConditionFalse, Message: "import failed: sha256 mismatch"}}
				if c.Status().Update(ctx, dv) == nil {
					return
				}
			}
		}
	}()
	manifest := "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata: {name: disk}\nspec: {source: {blank: {}}, storage: {}}\n"
	_, err := Run(ctx, c, Params{Manifest: manifest, DefaultNamespace: "ns", WaitForSuccess: true, Timeout: 5 * time.Second, Poll: 5 * time.Millisecond}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "DataVolume ns/disk failed: import failed: sha256 mismatch") {
		t.Errorf("err = %v", err)
	}
}

func TestOwnerAndPVCDeletion(t *testing.T) {
	c := newClient(t)
	ctx := context.Background()
	var out bytes.Buffer
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "pod-1", UID: "uid-1"}
	if _, err := Run(ctx, c, Params{Manifest: dsManifest, DefaultNamespace: "ns", SetOwnerReference: true}, &out); err == nil || !strings.Contains(err.Error(), "POD_NAME") {
		t.Errorf("owner unknown: %v", err)
	}
	if _, err := Run(ctx, c, Params{Manifest: dsManifest, DefaultNamespace: "ns", SetOwnerReference: true, Owner: owner}, &out); err != nil {
		t.Fatal(err)
	}
	ds := &cdiv1.DataSource{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "fedora"}, ds); err != nil || len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("owners %+v, %v", ds.OwnerReferences, err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "disk"}}
	if err := c.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if _, err := Run(ctx, c, Params{DeleteObject: true, DeleteObjectKind: "PersistentVolumeClaim", DeleteObjectName: "disk", DefaultNamespace: "ns", Poll: time.Millisecond}, &out); err != nil || !strings.Contains(out.String(), "PersistentVolumeClaim ns/disk deleted") {
		t.Fatalf("deleting a PVC: %v\n%s", err, out.String())
	}
	if _, err := Run(ctx, c, Params{DeleteObject: true, DeleteObjectKind: "Pod", DeleteObjectName: "x"}, &out); err == nil || !strings.Contains(err.Error(), "want DataVolume, DataSource or PersistentVolumeClaim") {
		t.Errorf("unknown kind: %v", err)
	}
}
