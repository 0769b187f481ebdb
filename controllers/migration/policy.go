package migration

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "kubevirt.io/api/core/v1"
	migrationsv1alpha1 "kubevirt.io/api/migrations/v1alpha1"
)

// MatchPolicy is the MigrationPolicy that applies to a VMI with vmiLabels
// in a namespace with nsLabels, as KubeVirt chooses it: a policy applies
// when it has selectors and every label of both is the VMI's or its
// namespace's; of those, the one matching most labels wins, then the one matching more
// of the VMI's, then the first by name. nil: none applies.
func MatchPolicy(policies []migrationsv1alpha1.MigrationPolicy, vmiLabels, nsLabels map[string]string) *migrationsv1alpha1.MigrationPolicy {
	type scored struct {
		p       *migrationsv1alpha1.MigrationPolicy
		vmi, ns int
	}
	var match []scored
	for i := range policies {
		p := &policies[i]
		if p.Spec.Selectors == nil {
			continue
		}
		vmiSel, nsSel := p.Spec.Selectors.VirtualMachineInstanceSelector, p.Spec.Selectors.NamespaceSelector
		if !within(vmiSel, vmiLabels) || !within(nsSel, nsLabels) {
			continue
		}
		match = append(match, scored{p: p, vmi: len(vmiSel), ns: len(nsSel)})
	}
	if len(match) == 0 {
		return nil
	}
	sort.Slice(match, func(i, j int) bool {
		a, b := match[i], match[j]
		if a.vmi+a.ns != b.vmi+b.ns {
			return a.vmi+a.ns > b.vmi+b.ns
		}
		if a.vmi != b.vmi {
			return a.vmi > b.vmi
		}
		return a.p.Name < b.p.Name
	})
	return match[0].p
}

// within says whether every label of sel is in labels, with its value.
func within(sel migrationsv1alpha1.LabelSelector, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ApplyPolicy is the cluster's options with what policy p sets in their
// place, as KubeVirt's: p's bandwidth, timeouts and permissions win over
// the cluster's; the cluster's limits stay.
func ApplyPolicy(cluster *v1.VMIMConfigurationOptions, p *migrationsv1alpha1.MigrationPolicy) *v1.VMIMConfigurationOptions {
	o := cluster.DeepCopy()
	if p == nil {
		return o
	}
	s := p.Spec
	if s.BandwidthPerMigration != nil {
		q := s.BandwidthPerMigration.DeepCopy()
		o.BandwidthPerMigration = &q
	}
	if s.CompletionTimeoutPerGiB != nil {
		o.CompletionTimeoutPerGiB = s.CompletionTimeoutPerGiB
	}
	if s.AllowAutoConverge != nil {
		o.AllowAutoConverge = s.AllowAutoConverge
	}
	if s.AllowPostCopy != nil {
		o.AllowPostCopy = s.AllowPostCopy
	}
	if s.AllowWorkloadDisruption != nil {
		o.AllowWorkloadDisruption = s.AllowWorkloadDisruption
	}
	if s.MaxDowntimeMs != nil {
		o.MaxDowntimeMs = s.MaxDowntimeMs
	}
	return o
}

// +kubebuilder:rbac:groups=migrations.kubevirt.io,resources=migrationpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// policyFor is the MigrationPolicy that applies to vmi (nil: none).
func policyFor(ctx context.Context, c client.Reader, vmi *v1.VirtualMachineInstance) (*migrationsv1alpha1.MigrationPolicy, error) {
	var list migrationsv1alpha1.MigrationPolicyList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing MigrationPolicies for %s: %w", klog.KObj(vmi), err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: vmi.Namespace}, ns); err != nil {
		return nil, fmt.Errorf("reading the namespace of %s for its MigrationPolicy: %w", klog.KObj(vmi), err)
	}
	return MatchPolicy(list.Items, vmi.Labels, ns.Labels), nil
}
