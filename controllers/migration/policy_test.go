package migration

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

func TestMatchPolicy(t *testing.T) {
	policy := func(name string, vmi, ns map[string]string) migrationsv1alpha1.MigrationPolicy {
		return migrationsv1alpha1.MigrationPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: migrationsv1alpha1.MigrationPolicySpec{Selectors: &migrationsv1alpha1.Selectors{VirtualMachineInstanceSelector: vmi, NamespaceSelector: ns}}}
	}
	vmiLabels := map[string]string{"workload-type": "db", "os": "linux"}
	nsLabels := map[string]string{"hpc": "true", "team": "a"}
	for _, tc := range []struct {
		name     string
		policies []migrationsv1alpha1.MigrationPolicy
		want     string
	}{
		{name: "none", want: ""},
		{name: "no selectors: applies to nothing", policies: []migrationsv1alpha1.MigrationPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}}, want: ""},
		{name: "empty selectors: applies to all", policies: []migrationsv1alpha1.MigrationPolicy{policy("all", nil, nil)}, want: "all"},
		{name: "one label differs", policies: []migrationsv1alpha1.MigrationPolicy{policy("db", map[string]string{"workload-type": "web"}, nil)}, want: ""},
		{name: "a namespace label missing", policies: []migrationsv1alpha1.MigrationPolicy{policy("ns", nil, map[string]string{"hpc": "true", "zone": "x"})}, want: ""},
		{name: "most labels win", policies: []migrationsv1alpha1.MigrationPolicy{
			policy("a-one", map[string]string{"os": "linux"}, nil),
			policy("z-three", map[string]string{"os": "linux"}, map[string]string{"hpc": "true", "team": "a"}),
		}, want: "z-three"},
		{name: "a tie: more VMI labels win", policies: []migrationsv1alpha1.MigrationPolicy{
			policy("a-ns", nil, map[string]string{"hpc": "true", "team": "a"}),
			policy("b-vmi", map[string]string{"os": "linux", "workload-type": "db"}, nil),
		}, want: "b-vmi"},
		{name: "a full tie: the first name wins", policies: []migrationsv1alpha1.MigrationPolicy{
			policy("b", map[string]string{"os": "linux"}, nil),
			policy("a", map[string]string{"workload-type": "db"}, nil),
		}, want: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if p := MatchPolicy(tc.policies, vmiLabels, nsLabels); p != nil {
				got = p.Name
			}
			if got != tc.want {
				t.Fatalf("MatchPolicy = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestApplyPolicy(t *testing.T) {
	cluster := Options(hcov1beta1.LiveMigrationConfigurations{AllowAutoConverge: ptr.To(true)})
	if got := ApplyPolicy(cluster, nil); *got.AllowAutoConverge != true || *got.CompletionTimeoutPerGiB != CompletionTimeoutPerGiB {
		t.Fatalf("no policy: %+v", got)
	}
	bw := resource.MustParse("1Mi")
	p := &migrationsv1alpha1.MigrationPolicy{Spec: migrationsv1alpha1.MigrationPolicySpec{
		AllowAutoConverge: ptr.To(false), BandwidthPerMigration: &bw, CompletionTimeoutPerGiB: ptr.To[int64](30),
		AllowPostCopy: ptr.To(true), AllowWorkloadDisruption: ptr.To(true), MaxDowntimeMs: ptr.To[uint64](500),
	}}
	got := ApplyPolicy(cluster, p)
	if *got.AllowAutoConverge || got.BandwidthPerMigration.Value() != 1<<20 || *got.CompletionTimeoutPerGiB != 30 ||
		!*got.AllowPostCopy || !*got.AllowWorkloadDisruption || *got.MaxDowntimeMs != 500 {
		t.Fatalf("the policy's fields did not win: %+v", got)
	}
	if *got.ParallelMigrationsPerCluster != ParallelMigrationsPerCluster || *got.ProgressTimeout != ProgressTimeout {
		t.Fatalf("the cluster's limits did not stay: %+v", got)
	}
	if !*cluster.AllowAutoConverge {
		t.Fatal("the cluster's options were changed")
	}
}
