package hostpathcsi

import "testing"

func TestLocationIDs(t *testing.T) {
	for _, tc := range []struct {
		id   string
		want location
		bad  bool
	}{
		{id: "local/vm/pvc-1234", want: location{Node: "vm", Name: "pvc-1234"}},
		{id: "shared/pvc-1234", want: location{Name: "pvc-1234"}},
		{id: "local/vm-node2/snapshot-9", want: location{Node: "vm-node2", Name: "snapshot-9"}},
		{id: "local/vm", bad: true},
		{id: "local/vm/../etc", bad: true},
		{id: "local/vm/a/b", bad: true},
		{id: "local/../x", bad: true},
		{id: "shared/.nodes", bad: true},
		{id: "shared/..", bad: true},
		{id: "shared/", bad: true},
		{id: "pvc-1234", bad: true},
		{id: "local/Vm/pvc", bad: true},
	} {
		got, err := parseLocation(tc.id)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed as %+v, want an error", tc.id, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: got %+v, %v; want %+v", tc.id, got, err, tc.want)
		}
		if got.String() != tc.id {
			t.Errorf("%q: String() = %q", tc.id, got.String())
		}
	}
}
