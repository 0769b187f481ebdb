package macpool

import (
	"errors"
	"strings"
	"testing"

	v1 "kubevirt.io/api/core/v1"
)

func TestParseRange(t *testing.T) {
	for _, tc := range []struct{ start, end, err string }{
		{start: "02:00:00:00:00:00", end: "02:00:00:ff:ff:ff"},
		{start: "02:00:00:00:00:05", end: "02:00:00:00:00:05"},
		{start: "02:00:00:00:00:06", end: "02:00:00:00:00:05", err: "is after rangeEnd"},
		{start: "03:00:00:00:00:00", end: "03:00:00:00:00:01", err: "multicast"},
		{start: "nope", end: "02:00:00:00:00:05", err: "rangeStart"},
		{start: "02:00:00:00:00:05", end: "02:00:00:00:00:05:00:00", err: "rangeEnd"},
	} {
		_, err := ParseRange(tc.start, tc.end)
		if (tc.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s-%s: %v, want %q", tc.start, tc.end, err, tc.err)
		}
	}
}

func TestAssign(t *testing.T) {
	r, err := ParseRange("02:00:00:00:00:00", "02:00:00:00:00:03")
	if err != nil {
		t.Fatal(err)
	}
	named := func(names ...string) []v1.Interface {
		var out []v1.Interface
		for _, n := range names {
			iface := v1.Interface{Name: n}
			if strings.Contains(n, ":") {
				iface.Name, iface.MacAddress = "fixed", n
			}
			out = append(out, iface)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		ifaces []v1.Interface
		taken  map[uint64]string
		want   []string
		err    string
	}{
		{name: "the first free ones, in order", ifaces: named("a", "b"),
			taken: map[uint64]string{0x020000000000: "VirtualMachine ns/x"}, want: []string{"02:00:00:00:00:01", "02:00:00:00:00:02"}},
		{name: "a MAC of its own is kept and not given again", ifaces: named("02:00:00:00:00:00", "a"),
			taken: map[uint64]string{}, want: []string{"02:00:00:00:00:00", "02:00:00:00:00:01"}},
		{name: "a MAC outside the range is kept", ifaces: named("52:54:00:00:00:01"), taken: map[uint64]string{}, want: []string{"52:54:00:00:00:01"}},
		{name: "another VM's MAC, same namespace: named", ifaces: named("02:00:00:00:00:02"),
			taken: map[uint64]string{0x020000000002: "VirtualMachine ns/x"}, err: "interfaces[0].macAddress 02:00:00:00:00:02 is already used by VirtualMachine ns/x"},
		{name: "another namespace's: not named", ifaces: named("02:00:00:00:00:02"),
			taken: map[uint64]string{0x020000000002: ""}, err: "is already used by another VirtualMachine"},
		{name: "twice in one VM", ifaces: named("02:00:00:00:00:02", "02:00:00:00:00:02"), taken: map[uint64]string{},
			err: "interfaces[1].macAddress 02:00:00:00:00:02 is already used by this VirtualMachine"},
		{name: "exhausted", ifaces: named("a", "b"), taken: map[uint64]string{0x020000000000: "", 0x020000000001: "", 0x020000000002: ""},
			err: "interfaces[1] (b): every MAC of the pool's range is in use (02:00:00:00:00:00-02:00:00:00:00:03)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := assign(r, tc.ifaces, tc.taken)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				if strings.Contains(tc.err, "every MAC") && !errors.Is(err, ErrExhausted) {
					t.Errorf("%v is not ErrExhausted", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range tc.want {
				if tc.ifaces[i].MacAddress != want {
					t.Errorf("interface %d: %s, want %s", i, tc.ifaces[i].MacAddress, want)
				}
			}
		})
	}
}
