package placement

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	v1 "kubevirt.io/api/core/v1"
)

// Reasons a node is turned down, worded as the scheduler words them.
const (
	reasonNotReady      = "node(s) were not ready"
	reasonUnschedulable = "node(s) were unschedulable"
	reasonTaint         = "node(s) had untolerated taint(s)"
	reasonAffinity      = "node(s) didn't match node selector or affinity"
	reasonSpread        = "node(s) didn't match topology spread constraints"
)

// Decision is the outcome of placing one VMI.
type Decision struct {
	// Node is the chosen node; empty when none fits.
	Node string
	// Message explains, when no node fits, why each was turned down.
	Message string
}

// Place chooses a node for vmi among nodes, given the VMIs already placed
// (those with status.nodeName set; vmi itself must not be among them).
func Place(vmi *v1.VirtualMachineInstance, nodes []*corev1.Node, placed []*v1.VirtualMachineInstance) (Decision, error) {
	required := nodeaffinity.GetRequiredNodeAffinity(pseudoPod(vmi))
	var preferred *nodeaffinity.PreferredSchedulingTerms
	if a := vmi.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		var err error
		if preferred, err = nodeaffinity.NewPreferredSchedulingTerms(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution); err != nil {
			return Decision{}, fmt.Errorf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution: %w", err)
		}
	}
	rejected := map[string]int{}
	var fits []*corev1.Node
	for _, n := range nodes {
		reason, err := filter(vmi, n, required, placedOn(placed, n.Name))
		if err != nil {
			return Decision{}, err
		}
		if reason != "" {
			rejected[reason]++
			continue
		}
		fits = append(fits, n)
	}
	fits, spreadRejected, err := spread(vmi, fits, nodes, placed)
	if err != nil {
		return Decision{}, err
	}
	if spreadRejected > 0 {
		rejected[reasonSpread] += spreadRejected
	}
	if len(fits) == 0 {
		return Decision{Message: unschedulableMessage(len(nodes), rejected)}, nil
	}
	best, bestScore := "", int64(-1)
	for _, n := range fits {
		score := freeMemoryScore(vmi, n, placedOn(placed, n.Name))
		if preferred != nil {
			score += preferred.Score(n)
		}
		if score > bestScore || (score == bestScore && n.Name < best) {
			best, bestScore = n.Name, score
		}
	}
	return Decision{Node: best}, nil
}

// pseudoPod carries the VMI's scheduling fields in the Pod shape the
// scheduling helpers read.
func pseudoPod(vmi *v1.VirtualMachineInstance) *corev1.Pod {
	return &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: vmi.Spec.NodeSelector, Affinity: vmi.Spec.Affinity, Tolerations: vmi.Spec.Tolerations}}
}

// filter returns why n cannot take vmi, or "".
func filter(vmi *v1.VirtualMachineInstance, n *corev1.Node, required nodeaffinity.RequiredNodeAffinity, onNode []*v1.VirtualMachineInstance) (string, error) {
	if !ready(n) {
		return reasonNotReady, nil
	}
	unschedulable := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if n.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), vmi.Spec.Tolerations, &unschedulable, false) {
		return reasonUnschedulable, nil
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, vmi.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); untolerated {
		return reasonTaint, nil
	}
	ok, err := required.Match(n)
	if err != nil {
		return "", fmt.Errorf("spec.affinity or spec.nodeSelector: %w", err)
	}
	if !ok {
		return reasonAffinity, nil
	}
	return insufficient(vmi, n, onNode), nil
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Requests are what a VMI takes from its node: spec.domain.resources.requests,
// with memory.guest standing in for a missing memory request.
func Requests(vmi *v1.VirtualMachineInstance) corev1.ResourceList {
	out := vmi.Spec.Domain.Resources.Requests.DeepCopy()
	if out == nil {
		out = corev1.ResourceList{}
	}
	if _, ok := out[corev1.ResourceMemory]; !ok {
		if m := vmi.Spec.Domain.Memory; m != nil && m.Guest != nil {
			out[corev1.ResourceMemory] = *m.Guest
		}
	}
	return out
}

// insufficient names the first resource n lacks for vmi, or "".
func insufficient(vmi *v1.VirtualMachineInstance, n *corev1.Node, onNode []*v1.VirtualMachineInstance) string {
	want := Requests(vmi)
	names := make([]string, 0, len(want))
	for r := range want {
		names = append(names, string(r))
	}
	sort.Strings(names)
	for _, name := range names {
		r := corev1.ResourceName(name)
		used := resource.Quantity{}
		for _, o := range onNode {
			if q, ok := Requests(o)[r]; ok {
				used.Add(q)
			}
		}
		used.Add(want[r])
		alloc, ok := n.Status.Allocatable[r]
		if !ok || used.Cmp(alloc) > 0 {
			return "Insufficient " + name
		}
	}
	return ""
}

// freeMemoryScore is the share (0-100) of allocatable memory left after
// placing vmi: the emptiest node wins.
func freeMemoryScore(vmi *v1.VirtualMachineInstance, n *corev1.Node, onNode []*v1.VirtualMachineInstance) int64 {
	alloc := n.Status.Allocatable[corev1.ResourceMemory]
	if alloc.Value() == 0 {
		return 0
	}
	used := Requests(vmi)[corev1.ResourceMemory]
	for _, o := range onNode {
		used.Add(Requests(o)[corev1.ResourceMemory])
	}
	return (alloc.Value() - used.Value()) * 100 / alloc.Value()
}

func placedOn(placed []*v1.VirtualMachineInstance, node string) []*v1.VirtualMachineInstance {
	var out []*v1.VirtualMachineInstance
	for _, p := range placed {
		if p.Status.NodeName == node {
			out = append(out, p)
		}
	}
	return out
}

// spread drops the candidates on which a DoNotSchedule topology spread
// constraint would exceed its maxSkew, counting matching VMIs per domain.
func spread(vmi *v1.VirtualMachineInstance, fits, all []*corev1.Node, placed []*v1.VirtualMachineInstance) ([]*corev1.Node, int, error) {
	rejected := 0
	for i, c := range vmi.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.DoNotSchedule {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(c.LabelSelector)
		if err != nil {
			return nil, 0, fmt.Errorf("spec.topologySpreadConstraints[%d].labelSelector: %w", i, err)
		}
		domainOf, counts := domainCounts(c.TopologyKey, sel, vmi.Namespace, all, placed)
		minCount := -1
		for _, n := range fits {
			if d, ok := domainOf[n.Name]; ok && (minCount < 0 || counts[d] < minCount) {
				minCount = counts[d]
			}
		}
		var kept []*corev1.Node
		for _, n := range fits {
			d, ok := domainOf[n.Name]
			if ok && counts[d]+1-minCount <= int(c.MaxSkew) {
				kept = append(kept, n)
			} else {
				rejected++
			}
		}
		fits = kept
	}
	return fits, rejected, nil
}

// domainCounts maps each node having topologyKey to its domain, and counts
// per domain the placed VMIs of namespace that sel matches.
func domainCounts(topologyKey string, sel labels.Selector, namespace string, all []*corev1.Node, placed []*v1.VirtualMachineInstance) (map[string]string, map[string]int) {
	domainOf := map[string]string{}
	counts := map[string]int{}
	for _, n := range all {
		if d, ok := n.Labels[topologyKey]; ok {
			domainOf[n.Name] = d
			counts[d] += 0
		}
	}
	for _, p := range placed {
		if d, ok := domainOf[p.Status.NodeName]; ok && p.Namespace == namespace && sel.Matches(labels.Set(p.Labels)) {
			counts[d]++
		}
	}
	return domainOf, counts
}

// unschedulableMessage says why no node fits, as the scheduler does.
func unschedulableMessage(total int, rejected map[string]int) string {
	reasons := make([]string, 0, len(rejected))
	for r, n := range rejected {
		reasons = append(reasons, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(reasons)
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(reasons, ", "))
}
