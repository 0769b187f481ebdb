package autoscale

import (
	"sort"
	"time"
)

// Resources are CPU (millicores) and memory (bytes).
type Resources struct{ CPU, Memory int64 }

func (r Resources) fits(in Resources) bool { return r.CPU <= in.CPU && r.Memory <= in.Memory }
func (r Resources) minus(o Resources) Resources {
	return Resources{CPU: r.CPU - o.CPU, Memory: r.Memory - o.Memory}
}
func (r Resources) plus(o Resources) Resources {
	return Resources{CPU: r.CPU + o.CPU, Memory: r.Memory + o.Memory}
}

// Pod is what the rules need of a Pod.
type Pod struct {
	Name     string
	Requests Resources
	// Ignored Pods (a DaemonSet's, static ones) neither count nor move.
	Ignored bool
	// Unowned Pods (no controller) cannot move; they keep their worker.
	Unowned bool
}

// Node is one worker of the pool, as its hosted node shows it.
type Node struct {
	Name        string
	Allocatable Resources
	Pods        []Pod
	// Ready and schedulable nodes take moved Pods and may be removed.
	Ready bool
}

func (n Node) requested() Resources {
	var sum Resources
	for _, p := range n.Pods {
		if !p.Ignored {
			sum = sum.plus(p.Requests)
		}
	}
	return sum
}

// Utilization is the larger of n's CPU and memory requested share.
func (n Node) Utilization() float64 {
	req := n.requested()
	u := 0.0
	if n.Allocatable.CPU > 0 {
		u = float64(req.CPU) / float64(n.Allocatable.CPU)
	}
	if n.Allocatable.Memory > 0 {
		u = max(u, float64(req.Memory)/float64(n.Allocatable.Memory))
	}
	return u
}

// Input is the pool's state.
type Input struct {
	Min, Max int
	// Current counts the pool's workers that stay (not being removed);
	// Upcoming how many of them have no Ready node yet: pending Pods are
	// expected to land there first.
	Current, Upcoming int
	// Template is a new worker's allocatable resources.
	Template Resources
	// Pending are the hosted cluster's unschedulable Pods.
	Pending []Pod
	Nodes   []Node
	// ScaleDown disabled means ScaleUpOnly.
	ScaleDown bool
	// Threshold is the utilisation under which a worker is unneeded
	// (0.5 upstream); UnneededTime how long it must stay so (10 minutes).
	Threshold    float64
	UnneededTime time.Duration
	// UnneededSince holds when each worker was first seen unneeded.
	UnneededSince map[string]time.Time
	Now           time.Time
}

// Decision is what to do.
type Decision struct {
	// Desired is the pool's worker count to reach.
	Desired int
	// Remove, when set, is the worker to drain and remove (Desired is one
	// less than Current then).
	Remove string
	// UnneededSince is the new record of unneeded workers.
	UnneededSince map[string]time.Time
	// Reason says why, for the log and the NodePool's condition.
	Reason string
}

// Decide applies the rules to in.
func Decide(in Input) Decision {
	d := Decision{Desired: min(max(in.Current, in.Min), in.Max), UnneededSince: map[string]time.Time{}}
	if d.Desired != in.Current {
		d.Reason = "held within min..max"
		return d
	}
	if add := NodesFor(in.Pending, in.Template) - in.Upcoming; add > 0 {
		d.Desired = min(in.Current+add, in.Max)
		if d.Desired > in.Current {
			d.Reason = "unschedulable Pods need more workers"
		} else {
			d.Reason = "unschedulable Pods, but the pool is at its max"
		}
		return d
	}
	if !in.ScaleDown || len(in.Pending) > 0 || in.Upcoming > 0 {
		return d
	}
	unneeded := Unneeded(in.Nodes, in.Threshold)
	var ripe []string
	for _, name := range unneeded {
		since, ok := in.UnneededSince[name]
		if !ok {
			since = in.Now
		}
		d.UnneededSince[name] = since
		if in.Now.Sub(since) >= in.UnneededTime {
			ripe = append(ripe, name)
		}
	}
	if len(ripe) > 0 && in.Current > in.Min {
		sort.Strings(ripe)
		d.Desired, d.Remove = in.Current-1, ripe[0]
		d.Reason = "worker " + ripe[0] + " unneeded for " + in.UnneededTime.String()
	}
	return d
}

// NodesFor is how many new workers of allocatable size template the
// pending Pods need, packed first-fit, largest first; Pods that do not fit
// an empty worker are left out.
func NodesFor(pending []Pod, template Resources) int {
	pods := make([]Pod, 0, len(pending))
	for _, p := range pending {
		if p.Requests.fits(template) {
			pods = append(pods, p)
		}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i].Requests, pods[j].Requests
		if a.CPU != b.CPU {
			return a.CPU > b.CPU
		}
		return a.Memory > b.Memory
	})
	var free []Resources
	for _, p := range pods {
		if !firstFit(p.Requests, free) {
			free = append(free, template.minus(p.Requests))
		}
	}
	return len(free)
}

// Unneeded lists the Ready workers under threshold whose Pods could all
// move to the other Ready workers (each worker considered alone, as
// upstream checks one removal at a time).
func Unneeded(nodes []Node, threshold float64) []string {
	var out []string
	for i, n := range nodes {
		if !n.Ready || n.Utilization() >= threshold {
			continue
		}
		if movable(n, nodes, i) {
			out = append(out, n.Name)
		}
	}
	return out
}

// movable says whether every counted Pod of nodes[i] fits, first-fit
// largest first, into the free room of the other Ready nodes.
func movable(n Node, nodes []Node, i int) bool {
	var free []Resources
	for j, o := range nodes {
		if j != i && o.Ready {
			free = append(free, o.Allocatable.minus(o.requested()))
		}
	}
	var pods []Pod
	for _, p := range n.Pods {
		if p.Ignored {
			continue
		}
		if p.Unowned {
			return false
		}
		pods = append(pods, p)
	}
	sort.SliceStable(pods, func(a, b int) bool { return pods[a].Requests.CPU > pods[b].Requests.CPU })
	for _, p := range pods {
		if !firstFit(p.Requests, free) {
			return false
		}
	}
	return true
}

// firstFit takes req from the first room in free that holds it, and says
// whether one did.
func firstFit(req Resources, free []Resources) bool {
	for i := range free {
		if req.fits(free[i]) {
			free[i] = free[i].minus(req)
			return true
		}
	}
	return false
}
