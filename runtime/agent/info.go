package agent

import "context"

// OSInfo is what guest-get-osinfo reports, named as in KubeVirt's
// VirtualMachineInstanceGuestOSInfo.
type OSInfo struct {
	Name          string `json:"name,omitempty"`
	KernelRelease string `json:"kernel-release,omitempty"`
	KernelVersion string `json:"kernel-version,omitempty"`
	Machine       string `json:"machine,omitempty"`
	ID            string `json:"id,omitempty"`
	PrettyName    string `json:"pretty-name,omitempty"`
	Version       string `json:"version,omitempty"`
	VersionID     string `json:"version-id,omitempty"`
}

// OSInfo asks the guest for its operating system.
func (c *Client) OSInfo(ctx context.Context) (OSInfo, error) {
	var info OSInfo
	err := c.call(ctx, "guest-get-osinfo", nil, &info)
	return info, err
}

// Hostname asks the guest for its host name.
func (c *Client) Hostname(ctx context.Context) (string, error) {
	var out struct {
		HostName string `json:"host-name"`
	}
	err := c.call(ctx, "guest-get-host-name", nil, &out)
	return out.HostName, err
}

// Interface is one network interface of the guest.
type Interface struct {
	Name string `json:"name"`
	MAC  string `json:"hardware-address,omitempty"`
	IPs  []IP   `json:"ip-addresses,omitempty"`
}

// IP is one address of an interface.
type IP struct {
	Type    string `json:"ip-address-type"`
	Address string `json:"ip-address"`
	Prefix  int    `json:"prefix"`
}

// Interfaces asks the guest for its network interfaces.
func (c *Client) Interfaces(ctx context.Context) ([]Interface, error) {
	var out []Interface
	err := c.call(ctx, "guest-network-get-interfaces", nil, &out)
	return out, err
}

// Shutdown asks the agent to power the guest off. The agent does not
// answer once it has started the shutdown, so a timeout is no failure.
func (c *Client) Shutdown(ctx context.Context) error {
	return c.call(ctx, "guest-shutdown", map[string]string{"mode": "powerdown"}, nil)
}
