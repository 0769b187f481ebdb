package dhcp

import (
	"net/netip"
	"slices"
	"strings"
)

// ResolvConf reads the DNS servers and search domains of a resolv.conf.
func ResolvConf(data []byte) (servers []netip.Addr, search []string) {
	for _, line := range strings.Split(string(data), "\n") {
		f := fieldsOf(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if a, err := netip.ParseAddr(f[1]); err == nil && !slices.Contains(servers, a) {
				servers = append(servers, a)
			}
		case "search":
			search = f[1:]
		case "domain":
			if search == nil {
				search = f[1:2]
			}
		}
	}
	return servers, search
}

// fieldsOf is a resolv.conf line's fields, without its comment.
func fieldsOf(line string) []string {
	if i := strings.IndexAny(line, "#;"); i >= 0 {
		line = line[:i]
	}
	return strings.Fields(line)
}
