package vmwebhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
)

// sized is the user guide's VM without its own sizing, naming an
// instancetype and a preference.
var sized = strings.Replace(strings.Replace(userGuideVM, "        cpu:\n          cores: 1\n", "", 1),
	"        resources:\n          requests:\n            memory: 64M\n", "", 1) +
	"  instancetype:\n    name: u1.small\n  preference:\n    name: tiny\n"

func TestSizingChecked(t *testing.T) {
	s := runtime.NewScheme()
	if err := instancetypev1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(s).WithObjects(
		&instancetypev1beta1.VirtualMachineClusterInstancetype{ObjectMeta: metav1.ObjectMeta{Name: "u1.small"},
			Spec: instancetypev1beta1.VirtualMachineInstancetypeSpec{CPU: instancetypev1beta1.CPUInstancetype{Guest: 1},
				Memory: instancetypev1beta1.MemoryInstancetype{Guest: resource.MustParse("2Gi")}}},
		&instancetypev1beta1.VirtualMachineClusterPreference{ObjectMeta: metav1.ObjectMeta{Name: "tiny"}},
		&instancetypev1beta1.VirtualMachineClusterPreference{ObjectMeta: metav1.ObjectMeta{Name: "needs-4"},
			Spec: instancetypev1beta1.VirtualMachinePreferenceSpec{Requirements: &instancetypev1beta1.PreferenceRequirements{
				CPU: &instancetypev1beta1.CPUPreferenceRequirement{Guest: 4}}}},
	).Build()
	v := Validator{Reader: reader}
	ctx := context.Background()
	if r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Create, sized)); !r.Allowed {
		t.Fatalf("VM naming an instancetype and a preference denied: %+v", r.Result)
	}
	for _, tc := range []struct{ name, manifest, want string }{
		{"missing preference", strings.Replace(sized, "name: tiny", "name: nope", 1), "VirtualMachineClusterPreference nope not found"},
		{"missing namespaced instancetype", strings.Replace(sized, "name: u1.small", "name: u1.small\n    kind: VirtualMachineInstancetype", 1),
			"VirtualMachineInstancetype u1.small not found"},
		{"VM sets CPU too", strings.Replace(sized, "      domain:\n", "      domain:\n        cpu:\n          cores: 2\n", 1),
			"spec.template.spec.domain.cpu conflict with the selected instancetype"},
		{"requirement not met", strings.Replace(sized, "name: tiny", "name: needs-4", 1), "the preference requires 4 vCPUs, the VM has 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := v.Handle(ctx, request(t, "VirtualMachine", admissionv1.Create, tc.manifest))
			if r.Allowed || !strings.Contains(r.Result.Message, tc.want) {
				t.Fatalf("allowed=%v %q, want denied with %q", r.Allowed, r.Result.Message, tc.want)
			}
		})
	}
}
