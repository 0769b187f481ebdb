// Package placement chooses the node of each new VirtualMachineInstance,
// as the scheduler does for pods: it filters nodes by readiness, taints and
// tolerations, nodeSelector and required node affinity, free capacity
// (CPU, memory and extended resources, counting the VMIs already placed)
// and topology spread constraints, scores the rest by free memory and
// preferred affinity, and records the choice in status.nodeName with the
// Scheduled phase, or why no node fits in the PodScheduled condition.
package placement
