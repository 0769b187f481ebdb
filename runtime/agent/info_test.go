package agent

import (
	"encoding/json"
	"testing"
)

func TestGuestInfo(t *testing.T) {
	sock := fakeAgent(t, func(cmd string, _ json.RawMessage) string {
		switch cmd {
		case "guest-get-osinfo":
			return `{"return": {"name": "Debian GNU/Linux", "kernel-release": "6.1.0-57-amd64", "machine": "x86_64", "id": "debian"}}`
		case "guest-get-host-name":
			return `{"return": {"host-name": "vm1"}}`
		case "guest-network-get-interfaces":
			return `{"return": [{"name": "eth0", "hardware-address": "52:54:00:12:34:56", ` +
				`"ip-addresses": [{"ip-address-type": "ipv4", "ip-address": "10.0.2.15", "prefix": 24}]}]}`
		}
		return `{"error": {"class": "CommandNotFound", "desc": "` + cmd + `"}}`
	})
	ctx, c := synced(t, sock)
	info, err := c.OSInfo(ctx)
	if err != nil || info.Name != "Debian GNU/Linux" || info.KernelRelease != "6.1.0-57-amd64" || info.ID != "debian" {
		t.Fatalf("OSInfo = %+v, %v", info, err)
	}
	host, err := c.Hostname(ctx)
	if err != nil || host != "vm1" {
		t.Fatalf("Hostname = %q, %v", host, err)
	}
	ifaces, err := c.Interfaces(ctx)
	if err != nil || len(ifaces) != 1 || ifaces[0].MAC != "52:54:00:12:34:56" || ifaces[0].IPs[0].Address != "10.0.2.15" {
		t.Fatalf("Interfaces = %+v, %v", ifaces, err)
	}
}
