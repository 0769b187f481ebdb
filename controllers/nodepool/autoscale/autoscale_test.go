package autoscale

import (
	"slices"
	"testing"
	"time"
)

const gi = int64(1) << 30

var worker = Resources{CPU: 1000, Memory: 1 * gi}

func pod(name string, cpu int64, mem int64) Pod {
	return Pod{Name: name, Requests: Resources{CPU: cpu, Memory: mem}}
}

func node(name string, pods ...Pod) Node {
	return Node{Name: name, Allocatable: worker, Ready: true, Pods: pods}
}

func TestNodesFor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pending []Pod
		want    int
	}{
		{"nothing pending", nil, 0},
		{"one small", []Pod{pod("a", 100, gi/8)}, 1},
		{"two share a worker", []Pod{pod("a", 400, gi/4), pod("b", 400, gi/4)}, 1},
		{"three halves need two", []Pod{pod("a", 600, 0), pod("b", 600, 0), pod("c", 300, 0)}, 2},
		{"memory bound", []Pod{pod("a", 10, 3*gi/4), pod("b", 10, 3*gi/4)}, 2},
		{"too big for any worker", []Pod{pod("huge", 4000, 0)}, 0},
		{"too big ignored, small counted", []Pod{pod("huge", 4000, 0), pod("a", 100, 0)}, 1},
		{"largest first packs tighter", []Pod{pod("s1", 300, 0), pod("s2", 300, 0), pod("l1", 700, 0), pod("l2", 700, 0)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodesFor(tc.pending, worker); got != tc.want {
				t.Errorf("NodesFor = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestUnneeded(t *testing.T) {
	daemon := Pod{Name: "ds", Requests: Resources{CPU: 900}, Ignored: true}
	bare := Pod{Name: "bare", Requests: Resources{CPU: 10}, Unowned: true}
	for _, tc := range []struct {
		name  string
		nodes []Node
		want  []string
	}{
		{"empty workers are unneeded", []Node{node("a"), node("b")}, []string{"a", "b"}},
		{"busy worker is needed", []Node{node("a", pod("p", 600, 0)), node("b")}, []string{"b"}},
		{"memory counts too", []Node{node("a", pod("p", 10, 600<<20)), node("b")}, []string{"b"}},
		{"DaemonSet Pods do not count", []Node{node("a", daemon), node("b", daemon)}, []string{"a", "b"}},
		{"an unowned Pod keeps its worker", []Node{node("a", bare), node("b")}, []string{"b"}},
		{"Pods that fit nowhere else keep it", []Node{node("a", pod("p", 400, 0)), node("b", pod("q", 700, 0))}, nil},
		{"Pods that fit elsewhere do not", []Node{node("a", pod("p", 200, 0)), node("b", pod("q", 700, 0))}, []string{"a"}},
		{"a lone worker's Pods have nowhere to go", []Node{node("a", pod("p", 100, 0))}, nil},
		{"not Ready is not a candidate nor a target", []Node{{Name: "a", Allocatable: worker}, node("b", pod("p", 100, 0))}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Unneeded(tc.nodes, 0.5); !slices.Equal(got, tc.want) {
				t.Errorf("Unneeded = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	now := time.Unix(10000, 0)
	long, short := now.Add(-11*time.Minute), now.Add(-time.Minute)
	base := func(current int, nodes []Node, pending []Pod, since map[string]time.Time) Input {
		return Input{Min: 2, Max: 5, Current: current, Template: worker, Pending: pending, Nodes: nodes, ScaleDown: true,
			Threshold: 0.5, UnneededTime: 10 * time.Minute, UnneededSince: since, Now: now}
	}
	busy := func(name string) Node { return node(name, pod(name+"-p", 800, 0)) }
	for _, tc := range []struct {
		name        string
		in          Input
		wantDesired int
		wantRemove  string
		wantSince   []string
	}{
		{"below min grows to min", base(0, nil, nil, nil), 2, "", nil},
		{"above max shrinks to max", base(7, nil, nil, nil), 5, "", nil},
		{"pending Pods add workers", base(2, []Node{busy("a"), busy("b")}, []Pod{pod("x", 600, 0), pod("y", 600, 0)}, nil), 4, "", nil},
		{"never above max", base(4, nil, []Pod{pod("x", 600, 0), pod("y", 600, 0), pod("z", 600, 0)}, nil), 5, "", nil},
		{"upcoming workers take pending Pods first", func() Input {
			in := base(3, []Node{busy("a"), busy("b")}, []Pod{pod("x", 600, 0), pod("y", 600, 0)}, nil)
			in.Upcoming = 1
			return in
		}(), 4, "", nil},
		{"nothing removed while a worker comes up", func() Input {
			in := base(3, []Node{busy("a"), node("b")}, nil, map[string]time.Time{"b": long})
			in.Upcoming = 1
			return in
		}(), 3, "", nil},
		{"a Pod no worker fits adds nothing", base(2, []Node{busy("a"), busy("b")}, []Pod{pod("huge", 5000, 0)}, nil), 2, "", nil},
		{"unneeded but not long enough", base(3, []Node{busy("a"), busy("b"), node("c")}, nil, map[string]time.Time{"c": short}), 3, "", []string{"c"}},
		{"first seen unneeded now", base(3, []Node{busy("a"), busy("b"), node("c")}, nil, nil), 3, "", []string{"c"}},
		{"unneeded long enough goes", base(3, []Node{busy("a"), busy("b"), node("c")}, nil, map[string]time.Time{"c": long}), 2, "c", []string{"c"}},
		{"one at a time", base(4, []Node{busy("a"), busy("b"), node("c"), node("d")}, nil, map[string]time.Time{"c": long, "d": long}), 3, "c", []string{"c", "d"}},
		{"never below min", base(2, []Node{node("a"), node("b")}, nil, map[string]time.Time{"a": long, "b": long}), 2, "", []string{"a", "b"}},
		{"a needed worker forgets its time", base(3, []Node{busy("a"), busy("b"), busy("c")}, nil, map[string]time.Time{"c": long}), 3, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(tc.in)
			if d.Desired != tc.wantDesired || d.Remove != tc.wantRemove {
				t.Errorf("Decide = desired %d remove %q (%s), want %d %q", d.Desired, d.Remove, d.Reason, tc.wantDesired, tc.wantRemove)
			}
			var since []string
			for n := range d.UnneededSince {
				since = append(since, n)
			}
			slices.Sort(since)
			if !slices.Equal(since, tc.wantSince) {
				t.Errorf("unneeded %v, want %v", since, tc.wantSince)
			}
		})
	}
	// ScaleUpOnly never removes.
	in := base(3, []Node{busy("a"), busy("b"), node("c")}, nil, map[string]time.Time{"c": long})
	in.ScaleDown = false
	if d := Decide(in); d.Desired != 3 || d.Remove != "" {
		t.Errorf("ScaleUpOnly removed %q", d.Remove)
	}
}
