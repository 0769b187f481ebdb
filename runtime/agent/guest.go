package agent

import "context"

// Description is what guest-info reports: the agent's version and the
// commands it knows.
type Description struct {
	Version  string `json:"version"`
	Commands []struct {
		Name    string `json:"name"`
		Enabled bool   `json:"enabled"`
	} `json:"supported_commands"`
}

// Describe asks the agent what it is.
func (c *Client) Describe(ctx context.Context) (Description, error) {
	var out Description
	err := c.call(ctx, "guest-info", nil, &out)
	return out, err
}

// User is one logged-in user (guest-get-users).
type User struct {
	Name      string  `json:"user"`
	Domain    string  `json:"domain,omitempty"`
	LoginTime float64 `json:"login-time"`
}

// Users asks the guest who is logged in.
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out []User
	err := c.call(ctx, "guest-get-users", nil, &out)
	return out, err
}

// Filesystem is one mounted filesystem (guest-get-fsinfo).
type Filesystem struct {
	Name       string `json:"name"`
	Mountpoint string `json:"mountpoint"`
	Type       string `json:"type"`
	UsedBytes  int    `json:"used-bytes,omitempty"`
	TotalBytes int    `json:"total-bytes,omitempty"`
	Disks      []struct {
		Serial  string `json:"serial,omitempty"`
		BusType string `json:"bus-type"`
	} `json:"disk"`
}

// Filesystems asks the guest for its mounted filesystems.
func (c *Client) Filesystems(ctx context.Context) ([]Filesystem, error) {
	var out []Filesystem
	err := c.call(ctx, "guest-get-fsinfo", nil, &out)
	return out, err
}

// Timezone asks the guest for its time zone, as KubeVirt shows it
// ("zone, offset seconds").
func (c *Client) Timezone(ctx context.Context) (zone string, offset int, err error) {
	var out struct {
		Zone   string `json:"zone"`
		Offset int    `json:"offset"`
	}
	err = c.call(ctx, "guest-get-timezone", nil, &out)
	return out.Zone, out.Offset, err
}

// Freeze freezes the guest's filesystems and returns how many.
func (c *Client) Freeze(ctx context.Context) (int, error) {
	var n int
	err := c.call(ctx, "guest-fsfreeze-freeze", nil, &n)
	return n, err
}

// Thaw thaws the guest's filesystems and returns how many.
func (c *Client) Thaw(ctx context.Context) (int, error) {
	var n int
	err := c.call(ctx, "guest-fsfreeze-thaw", nil, &n)
	return n, err
}

// FreezeStatus is "frozen" or "thawed".
func (c *Client) FreezeStatus(ctx context.Context) (string, error) {
	var s string
	err := c.call(ctx, "guest-fsfreeze-status", nil, &s)
	return s, err
}
