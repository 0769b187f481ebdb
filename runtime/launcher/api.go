package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/contracts/stream"
	"github.com/tekvirt/tekvirt/runtime/agent"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// The files of a VM's directory (its launcher Pod's vm volume). The handler
// writes SpecFile (and CancelFile); the launcher and QEMU write the rest.
const (
	SpecFile   = "launch.json"
	SocketFile = "launcher.sock"
	ExitFile   = "exit.json"
	SerialLog  = "serial.log"
	// TargetReadyFile, written by a migration's target launcher, says its
	// libvirtd takes the incoming domain.
	TargetReadyFile = "target-ready"
	// CancelFile, written by the handler in a launcher Pod's directory,
	// tells a launcher waiting for its spec that none will come (the VMI
	// failed before it was prepared): it ends, and its Pod with it.
	CancelFile = "cancel"
)

// Spec is everything a launcher needs to run one VMI.
type Spec struct {
	// URI of the libvirt daemon: the Pod's own, set by the launcher.
	URI string `json:"uri,omitempty"`
	// VMI as the handler saw it when it prepared the VM.
	VMI *v1.VirtualMachineInstance `json:"vmi"`
	// Options carry the prepared volumes and sockets.
	Options domain.Options `json:"options"`
	// Incoming makes the launcher a live migration's target: it starts its
	// libvirtd and waits for the domain to arrive instead of starting it.
	Incoming bool `json:"incoming,omitempty"`
	// QEMUCapabilities are the node's QEMU capabilities files (ProbeQEMU),
	// at the launcher's paths: the launcher installs them in libvirtd's
	// cache before it starts libvirtd, so starting the domain does not
	// probe QEMU again.
	QEMUCapabilities []string `json:"qemuCapabilities,omitempty"`
}

// EncodeSpec is the content of SpecFile for s.
func EncodeSpec(s *Spec) ([]byte, error) { return json.MarshalIndent(s, "", "  ") }

// ReadSpec loads the spec in dir.
func ReadSpec(dir string) (*Spec, error) {
	data, err := os.ReadFile(filepath.Join(dir, SpecFile))
	if err != nil {
		return nil, err
	}
	s := &Spec{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, SpecFile), err)
	}
	return s, nil
}

// AwaitSpec waits until the handler has written the spec in dir (a
// launcher Pod starts before its node's handler has prepared the VM) and
// loads it; it returns ctx's error if the Pod is stopped first, and nil,
// nil if the handler cancelled the launch.
func AwaitSpec(ctx context.Context, dir string, poll time.Duration) (*Spec, error) {
	for {
		s, err := ReadSpec(dir)
		if !errors.Is(err, os.ErrNotExist) {
			return s, err
		}
		if _, err := os.Stat(filepath.Join(dir, CancelFile)); err == nil {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s in %s: %w", SpecFile, dir, ctx.Err())
		case <-time.After(poll):
		}
	}
}

// Status is what a running launcher reports.
type Status struct {
	// Domain is the libvirt state: "running", "paused", "shutoff", ...
	Domain string `json:"domain"`
	// StartedAt is when the domain was created.
	StartedAt time.Time `json:"startedAt"`
	// AgentConnected is true while the guest agent answers.
	AgentConnected bool              `json:"agentConnected"`
	OSInfo         *agent.OSInfo     `json:"osInfo,omitempty"`
	Hostname       string            `json:"hostname,omitempty"`
	Interfaces     []agent.Interface `json:"interfaces,omitempty"`
	// PodIPs are the launcher Pod's addresses, whose port 22 reaches the
	// guest's (empty outside a Pod).
	PodIPs []string `json:"podIPs,omitempty"`
	// MACs are the guest's interfaces' MACs by the VMI's interface names
	// (empty outside a Pod).
	MACs map[string]string `json:"macs,omitempty"`
	// AccessCredentials is set when the VMI has accessCredentials.
	AccessCredentials *CredentialsStatus `json:"accessCredentials,omitempty"`
	// Migration is the domain's migration to another launcher, once asked.
	Migration *MigrationStatus `json:"migration,omitempty"`
	// Disks are the targets of the domain's disks by VMI volume name.
	Disks map[string]string `json:"disks,omitempty"`
}

// Stats are a running domain's use of the node, as libvirt counts it.
type Stats struct {
	// MemoryDomainBytes is the memory the domain was given.
	MemoryDomainBytes uint64 `json:"memoryDomainBytes"`
	// MemoryResidentBytes is the resident set of its QEMU process.
	MemoryResidentBytes uint64 `json:"memoryResidentBytes"`
	// CPUSeconds is the CPU time of the whole domain (vCPUs and QEMU).
	CPUSeconds float64     `json:"cpuSeconds"`
	VCPUs      []VCPUStats `json:"vcpus"`
}

// VCPUStats are one vCPU's state and the CPU time it has used.
type VCPUStats struct {
	ID int `json:"id"`
	// State is "running", "blocked" or "offline".
	State   string  `json:"state"`
	Seconds float64 `json:"seconds"`
}

// Exited is written by the launcher when its domain has ended.
type Exited struct {
	Exit
	At time.Time `json:"at"`
}

// DecodeExit reads an exit record.
func DecodeExit(data []byte) (*Exited, error) {
	e := &Exited{}
	if err := json.Unmarshal(data, e); err != nil {
		return nil, err
	}
	return e, nil
}

func jsonMarshal(v any) ([]byte, error) { return json.MarshalIndent(v, "", "  ") }

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// Client talks to the launcher of the VM in a directory.
type Client struct {
	http *http.Client
}

// NewClientDial returns a client of the launcher that dial reaches.
func NewClientDial(dial func(ctx context.Context) (net.Conn, error)) *Client {
	return &Client{http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
	}}}
}

// Status asks for the domain and guest state.
func (c *Client) Status(ctx context.Context) (*Status, error) {
	st := &Status{}
	return st, c.do(ctx, http.MethodGet, "/status", nil, st)
}

// Stats asks for the domain's resource use.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	st := &Stats{}
	return st, c.do(ctx, http.MethodGet, "/stats", nil, st)
}

// Exec runs a program in the guest.
func (c *Client) Exec(ctx context.Context, req guestexec.Request) (*guestexec.Result, error) {
	res := &guestexec.Result{}
	return res, c.do(ctx, http.MethodPost, "/exec", req, res)
}

// Shutdown asks the guest to power off and destroys the domain after grace.
func (c *Client) Shutdown(ctx context.Context, grace time.Duration) error {
	return c.do(ctx, http.MethodPost, "/shutdown", map[string]int64{"graceSeconds": int64(grace.Seconds())}, nil)
}

// Migrate starts the domain's live migration to the target the handler
// connected the Pod's loopback to; its progress is in Status.
func (c *Client) Migrate(ctx context.Context, req MigrateRequest) error {
	return c.do(ctx, http.MethodPost, "/migrate", req, nil)
}

// WaitMigration waits until the migration is no longer running, or the
// launcher's bound on one wait passed, and returns its status (nil: no
// migration ran).
func (c *Client) WaitMigration(ctx context.Context) (*MigrationStatus, error) {
	var st *MigrationStatus
	err := c.do(ctx, http.MethodGet, "/migrate/wait", nil, &st)
	return st, err
}

// AbortMigration aborts a running migration; the domain runs on here.
func (c *Client) AbortMigration(ctx context.Context) error {
	return c.do(ctx, http.MethodPost, "/migrate/abort", nil, nil)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://launcher"+path, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("launcher %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("launcher %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return &OpError{Code: resp.StatusCode, Msg: string(bytes.TrimSpace(data))}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	return json.Unmarshal(data, out)
}

// OpError is a launcher's refusal: its HTTP code (409: the VM's state does
// not allow it; 502: the guest failed) and message.
type OpError struct {
	Code int
	Msg  string
}

func (e *OpError) Error() string { return e.Msg }

// Stream opens a stream of the launcher (path, Upgrade protocol); a
// refusal is a *stream.Refused.
func (c *Client) Stream(ctx context.Context, path, protocol string) (io.ReadWriteCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://launcher"+path, nil)
	if err != nil {
		return nil, err
	}
	return stream.Open(c.http, req, protocol)
}
