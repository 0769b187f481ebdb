package launcher

import "testing"

// TestParseGuestPort: KubeVirt's port-forward names a port 1-65535 and
// optionally tcp or udp (any case); anything else is refused.
func TestParseGuestPort(t *testing.T) {
	for _, tc := range []struct {
		port, protocol string
		want           GuestPort
		bad            bool
	}{
		{"22", "", GuestPort{"tcp", 22}, false},
		{"53", "UDP", GuestPort{"udp", 53}, false},
		{"65535", "tcp", GuestPort{"tcp", 65535}, false},
		{"0", "", GuestPort{}, true},
		{"65536", "", GuestPort{}, true},
		{"-1", "", GuestPort{}, true},
		{"ssh", "", GuestPort{}, true},
		{"22", "sctp", GuestPort{}, true},
	} {
		got, err := ParseGuestPort(tc.port, tc.protocol)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseGuestPort(%q, %q) = %v, %v; want %v, bad %v", tc.port, tc.protocol, got, err, tc.want, tc.bad)
		}
	}
}
