// Package autoscale decides how many workers an autoscaled NodePool wants,
// following the cluster-autoscaler's documented rules (its module is not
// available to this project, so the rules are reimplemented here, pure and
// table-tested):
//
//   - scale up when Pods are unschedulable and a new worker of the pool
//     would fit them: the Pods are packed first-fit, largest first, onto as
//     many new workers (of the pool's allocatable size) as they need, less
//     the workers still coming up, never above max; a Pod no empty worker
//     could hold adds nothing;
//   - scale down a worker whose requested CPU and memory are both under
//     the utilisation threshold and whose Pods could all move to the other
//     workers, once it has been so for the unneeded time; one worker at a
//     time, never below min, never while anything is pending or a worker
//     is coming up. Pods of
//     DaemonSets and static Pods do not count; a Pod no controller owns
//     blocks its worker's removal, as by default upstream.
package autoscale
