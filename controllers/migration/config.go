package migration

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"

	hcov1beta1 "github.com/tekvirt/tekvirt/controllers/apis/hco/v1beta1"
)

// KubeVirt's default limits and timeouts of live migration, which the
// HyperConverged's liveMigrationConfig overrides.
const (
	ParallelMigrationsPerCluster      = 5
	ParallelOutboundMigrationsPerNode = 2
	CompletionTimeoutPerGiB           = 150
	ProgressTimeout                   = 150
)

// Options are a migration's configuration from the HyperConverged's
// liveMigrationConfig, KubeVirt's defaults where it says nothing. A
// bandwidth that does not parse is no cap (the CRD's pattern refuses
// most).
func Options(c hcov1beta1.LiveMigrationConfigurations) *v1.VMIMConfigurationOptions {
	bandwidth := resource.MustParse("0Mi")
	if c.BandwidthPerMigration != nil {
		if q, err := resource.ParseQuantity(*c.BandwidthPerMigration); err == nil && q.Sign() >= 0 {
			bandwidth = q
		}
	}
	return &v1.VMIMConfigurationOptions{
		ParallelMigrationsPerCluster:      ptr.To(ptr.Deref(c.ParallelMigrationsPerCluster, ParallelMigrationsPerCluster)),
		ParallelOutboundMigrationsPerNode: ptr.To(ptr.Deref(c.ParallelOutboundMigrationsPerNode, ParallelOutboundMigrationsPerNode)),
		BandwidthPerMigration:             &bandwidth,
		CompletionTimeoutPerGiB:           ptr.To(ptr.Deref(c.CompletionTimeoutPerGiB, CompletionTimeoutPerGiB)),
		ProgressTimeout:                   ptr.To(ptr.Deref(c.ProgressTimeout, ProgressTimeout)),
		AllowAutoConverge:                 ptr.To(ptr.Deref(c.AllowAutoConverge, false)),
		AllowPostCopy:                     ptr.To(ptr.Deref(c.AllowPostCopy, false)),
		AllowWorkloadDisruption:           ptr.To(false),
	}
}

// ClusterOptions are the migration options of the cluster's
// HyperConverged, or KubeVirt's defaults without one.
func ClusterOptions(ctx context.Context, c client.Reader) (*v1.VMIMConfigurationOptions, error) {
	var list hcov1beta1.HyperConvergedList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("reading the HyperConverged's liveMigrationConfig: %w", err)
	}
	if len(list.Items) == 0 {
		return Options(hcov1beta1.LiveMigrationConfigurations{}), nil
	}
	return Options(list.Items[0].Spec.LiveMigrationConfig), nil
}
