package launcher

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/launcherpod"
	"github.com/tekvirt/tekvirt/runtime/diskfile"
	"github.com/tekvirt/tekvirt/runtime/domain"
)

// AttachRequest attaches a hotplugged volume's disk to the running domain.
type AttachRequest struct {
	// Disk is the VMI's disk of the volume (its name is the volume's).
	Disk v1.Disk `json:"disk"`
	// Path is the disk image, where the handler mounted the volume in the
	// Pod (launcherpod.HotplugDir).
	Path     string `json:"path"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// AttachReply is the disk's target in the domain.
type AttachReply struct {
	Target string `json:"target"`
}

// maxRequest bounds a hotplug request.
const maxRequest = 64 << 10

// hotplugAlias is the libvirt alias of a VMI disk, as ConfigureDisks names it.
func hotplugAlias(volume string) string { return "ua-" + volume }

// AttachDisk asks the launcher to attach a hotplugged volume's disk and
// returns its target.
func (c *Client) AttachDisk(ctx context.Context, req AttachRequest) (string, error) {
	var reply AttachReply
	if err := c.do(ctx, http.MethodPost, "/hotplug/attach", req, &reply); err != nil {
		return "", err
	}
	return reply.Target, nil
}

func (s *server) handleAttach(w http.ResponseWriter, r *http.Request) {
	var req AttachRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest)).Decode(&req); err != nil || req.Disk.Name == "" || !strings.HasPrefix(req.Path, launcherpod.HotplugDir+"/") {
		http.Error(w, "an attach request names its disk and the disk's path in "+launcherpod.HotplugDir, http.StatusBadRequest)
		return
	}
	target, err := s.vm.AttachDisk(req)
	if err != nil {
		s.log.Error("hotplug attach failed", "disk", req.Disk.Name, "err", err)
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	s.log.Info("disk hotplugged", "disk", req.Disk.Name, "target", target)
	writeJSON(w, AttachReply{Target: target})
}

// AttachDisk attaches the disk of req to the running domain with the VMI
// disk's bus and serial, on the first free target of its bus; a disk
// attached already answers with its target. The image must be a regular
// file or a block device reached without a link, as a boot disk.
func (vm *VM) AttachDisk(req AttachRequest) (string, error) {
	defer vm.disks.forget()
	disks, err := vm.liveDisks()
	if err != nil {
		return "", err
	}
	for _, d := range disks {
		if d.Alias != nil && d.Alias.Name == hotplugAlias(req.Disk.Name) {
			return d.Target.Dev, nil
		}
	}
	f, err := diskfile.Open(filepath.Dir(req.Path), filepath.Base(req.Path), !req.ReadOnly)
	if err != nil {
		return "", fmt.Errorf("disk %s: %w", req.Disk.Name, err)
	}
	f.Close()
	dd, err := domain.HotplugDisk(req.Disk, domain.Volume{Path: req.Path, Format: "raw", ReadOnly: req.ReadOnly}, disks)
	if err != nil {
		return "", err
	}
	xml, err := dd.Marshal()
	if err != nil {
		return "", err
	}
	if err := vm.dom.AttachDeviceFlags(xml, libvirt.DOMAIN_DEVICE_MODIFY_LIVE); err != nil {
		return "", fmt.Errorf("attaching disk %s: %w", req.Disk.Name, err)
	}
	return dd.Target.Dev, nil
}

// DetachDisk takes the hotplugged disk of volume out of the running
// domain and waits, up to wait, for the guest to let it go; a disk that
// is not there is detached.
func (vm *VM) DetachDisk(volume string, wait time.Duration) error {
	defer vm.disks.forget()
	present := func() (bool, error) {
		disks, err := vm.liveDisks()
		if err != nil {
			return false, err
		}
		for _, d := range disks {
			if d.Alias != nil && d.Alias.Name == hotplugAlias(volume) {
				return true, nil
			}
		}
		return false, nil
	}
	if ok, err := present(); !ok || err != nil {
		return err
	}
	err := vm.dom.DetachDeviceAlias(hotplugAlias(volume), libvirt.DOMAIN_DEVICE_MODIFY_LIVE)
	if err != nil && !strings.Contains(err.Error(), "already in the process of unplug") {
		return fmt.Errorf("detaching disk %s: %w", volume, err)
	}
	deadline := time.Now().Add(wait)
	for {
		ok, err := present()
		if !ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("disk %s: the guest has not released it yet", volume)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Disks are the targets of the domain's disks by VMI volume name.
// They are read from the domain once, and again after an attach or detach.
func (vm *VM) Disks() (map[string]string, error) {
	vm.disks.mu.Lock()
	defer vm.disks.mu.Unlock()
	if vm.disks.byVolume != nil {
		return maps.Clone(vm.disks.byVolume), nil
	}
	disks, err := vm.liveDisks()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range disks {
		if d.Alias != nil && strings.HasPrefix(d.Alias.Name, "ua-") && d.Target != nil {
			out[strings.TrimPrefix(d.Alias.Name, "ua-")] = d.Target.Dev
		}
	}
	vm.disks.byVolume = out
	return maps.Clone(out), nil
}

// diskCache is what Disks read last (nil: read again).
type diskCache struct {
	mu       sync.Mutex
	byVolume map[string]string
}

// forget has Disks read the domain again.
func (c *diskCache) forget() {
	c.mu.Lock()
	c.byVolume = nil
	c.mu.Unlock()
}

func (vm *VM) liveDisks() ([]libvirtxml.DomainDisk, error) {
	xml, err := vm.dom.GetXMLDesc(0)
	if err != nil {
		return nil, fmt.Errorf("reading the domain: %w", err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(xml); err != nil {
		return nil, fmt.Errorf("reading the domain: %w", err)
	}
	if d.Devices == nil {
		return nil, nil
	}
	return d.Devices.Disks, nil
}

// DetachRequest takes a hotplugged volume's disk out of the domain.
type DetachRequest struct {
	Volume string `json:"volume"`
}

// detachWait is how long a detach waits for the guest before it answers
// that the disk is not released yet (the handler asks again).
const detachWait = 10 * time.Second

func (s *server) handleDetach(w http.ResponseWriter, r *http.Request) {
	var req DetachRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequest)).Decode(&req); err != nil || req.Volume == "" {
		http.Error(w, "a detach request names its volume", http.StatusBadRequest)
		return
	}
	if err := s.vm.DetachDisk(req.Volume, detachWait); err != nil {
		s.log.Error("hotplug detach", "volume", req.Volume, "err", err)
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	s.log.Info("disk unplugged", "volume", req.Volume)
	w.WriteHeader(http.StatusNoContent)
}

// DetachDisk asks the launcher to take volume's disk out of the domain.
func (c *Client) DetachDisk(ctx context.Context, volume string) error {
	return c.do(ctx, http.MethodPost, "/hotplug/detach", DetachRequest{Volume: volume}, nil)
}
