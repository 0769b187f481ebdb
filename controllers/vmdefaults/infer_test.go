package vmdefaults

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
)

// inferVM is what `virtctl create vm --volume-import=type:ds,src:NS/DS`
// prints without --memory: both matchers inferred from the volume, failures
// ignored, 512Mi of guest memory as the fallback.
func inferVM(volume v1.VolumeSource, templates ...v1.DataVolumeTemplateSpec) *v1.VirtualMachine {
	ignore := v1.IgnoreInferFromVolumeFailure
	return &v1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "vm"},
		Spec: v1.VirtualMachineSpec{
			Instancetype:        &v1.InstancetypeMatcher{InferFromVolume: "root", InferFromVolumeFailurePolicy: &ignore},
			Preference:          &v1.PreferenceMatcher{InferFromVolume: "root", InferFromVolumeFailurePolicy: &ignore},
			DataVolumeTemplates: templates,
			Template: &v1.VirtualMachineInstanceTemplateSpec{Spec: v1.VirtualMachineInstanceSpec{
				Domain:  v1.DomainSpec{Memory: &v1.Memory{Guest: mem("512Mi")}},
				Volumes: []v1.Volume{{Name: "root", VolumeSource: volume}},
			}},
		},
	}
}

func TestInfer(t *testing.T) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cdiv1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	defaults := map[string]string{
		instancetype.DefaultInstancetypeLabel: "u1.small", instancetype.DefaultPreferenceLabel: "tekvirt.guest",
		instancetype.DefaultPreferenceKindLabel: "VirtualMachineClusterPreference",
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "labelled", Labels: defaults}},
		&cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "bare"},
			Spec: cdiv1.DataSourceSpec{Source: cdiv1.DataSourceSource{PVC: &cdiv1.DataVolumeSourcePVC{Namespace: "images", Name: "disk"}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "images", Name: "disk"}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine", Labels: defaults}},
		&cdiv1.DataSource{ObjectMeta: metav1.ObjectMeta{Namespace: "private", Name: "secret", Labels: defaults}},
	).Build()
	fromDS := func(name string) (v1.VolumeSource, v1.DataVolumeTemplateSpec) {
		return v1.VolumeSource{DataVolume: &v1.DataVolumeSource{Name: "vm-root"}}, v1.DataVolumeTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "vm-root"},
			Spec:       cdiv1.DataVolumeSpec{SourceRef: &cdiv1.DataVolumeSourceRef{Kind: "DataSource", Namespace: ptr.To("images"), Name: name}},
		}
	}
	labelled, labelledDV := fromDS("labelled")
	bare, bareDV := fromDS("bare")
	secret, secretDV := fromDS("secret")
	secretDV.Spec.SourceRef.Namespace = ptr.To("private")
	missing, missingDV := fromDS("no-such-source")
	missingDV.Spec.SourceRef.Namespace = ptr.To("private")
	// The requester may clone from images, not from private.
	mayRead := func(_ context.Context, ns string) error {
		if ns == "private" {
			return errors.New("alice may not clone from namespace private")
		}
		return nil
	}
	for _, tc := range []struct {
		name   string
		vm     *v1.VirtualMachine
		strict bool
		// it and pref are the matchers' names after inference ("": none);
		// memory whether the fallback memory stays.
		it, pref string
		memory   bool
		err      string
	}{
		{name: "a labelled DataSource names both; the fallback memory goes", vm: inferVM(labelled, labelledDV), it: "u1.small", pref: "tekvirt.guest"},
		{name: "a DataSource and its PVC without labels: both matchers go, the memory stays", vm: inferVM(bare, bareDV), memory: true},
		{name: "a labelled PVC", vm: inferVM(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "mine"}}}), it: "u1.small", pref: "tekvirt.guest"},
		{name: "no label and no Ignore policy: refused naming the field", vm: inferVM(bare, bareDV), strict: true,
			err: `spec.instancetype.inferFromVolume "root": no default: label instancetype.kubevirt.io/default-instancetype not found`},
		{name: "a missing PVC is an error even with Ignore", vm: inferVM(v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gone"}}}), err: "reading PVC ns/gone"},
		// Whether it exists or not, a DataSource of a namespace the
		// requester may not clone from is not read: the same refusal.
		{name: "another tenant's DataSource is not read", vm: inferVM(secret, secretDV), err: "reading DataSource private/secret: alice may not clone from namespace private"},
		{name: "another tenant's missing DataSource: the same refusal", vm: inferVM(missing, missingDV), err: "reading DataSource private/no-such-source: alice may not clone from namespace private"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.strict {
				tc.vm.Spec.Instancetype.InferFromVolumeFailurePolicy = nil
			}
			err := Infer(context.Background(), c, tc.vm, mayRead)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.vm.Spec.Instancetype; (tc.it == "") != (got == nil) || got != nil && (got.Name != tc.it || got.InferFromVolume != "") {
				t.Errorf("instancetype %+v, want %q", got, tc.it)
			}
			if got := tc.vm.Spec.Preference; (tc.pref == "") != (got == nil) || got != nil && (got.Name != tc.pref || got.Kind != "VirtualMachineClusterPreference") {
				t.Errorf("preference %+v, want %q", got, tc.pref)
			}
			if has := tc.vm.Spec.Template.Spec.Domain.Memory != nil; has != tc.memory {
				t.Errorf("memory kept %v, want %v", has, tc.memory)
			}
		})
	}
}
