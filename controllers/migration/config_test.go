package migration

import (
	"testing"

	"k8s.io/utils/ptr"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// TestOptions: the HyperConverged's liveMigrationConfig, KubeVirt's
// defaults where it is silent.
func TestOptions(t *testing.T) {
	def := Options(hcov1beta1.LiveMigrationConfigurations{})
	if *def.ParallelMigrationsPerCluster != 5 || *def.ParallelOutboundMigrationsPerNode != 2 || *def.CompletionTimeoutPerGiB != 150 ||
		*def.ProgressTimeout != 150 || *def.AllowAutoConverge || *def.AllowPostCopy || !def.BandwidthPerMigration.IsZero() {
		t.Errorf("defaults: %+v", def)
	}
	got := Options(hcov1beta1.LiveMigrationConfigurations{ParallelMigrationsPerCluster: ptr.To[uint32](1), ProgressTimeout: ptr.To[int64](30),
		BandwidthPerMigration: ptr.To("64Mi"), AllowAutoConverge: ptr.To(true)})
	if *got.ParallelMigrationsPerCluster != 1 || *got.ParallelOutboundMigrationsPerNode != 2 || *got.ProgressTimeout != 30 ||
		got.BandwidthPerMigration.Value() != 64<<20 || !*got.AllowAutoConverge || *got.AllowPostCopy {
		t.Errorf("configured: %+v", got)
	}
	if bad := Options(hcov1beta1.LiveMigrationConfigurations{BandwidthPerMigration: ptr.To("-1Mi")}); !bad.BandwidthPerMigration.IsZero() {
		t.Errorf("a negative bandwidth: %v, want no cap", bad.BandwidthPerMigration)
	}
}
