package launcher

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/domain"
)

// HotplugSocketFile is where the launcher takes hotplugged disks: the
// handler sends an AttachRequest with the disk's open descriptor
// (SCM_RIGHTS), as nothing of the attachment Pod's volume is visible in
// the launcher Pod.
const HotplugSocketFile = "hotplug.sock"

// AttachRequest attaches the disk sent with it to the running domain.
type AttachRequest struct {
	// Disk is the VMI's disk of the volume (its name is the volume's).
	Disk v1.Disk `json:"disk"`
	// Format is the image's format ("raw").
	Format   string `json:"format"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// AttachReply is the launcher's answer: the disk's target in the domain,
// or why it was not attached.
type AttachReply struct {
	Target string `json:"target,omitempty"`
	Error  string `json:"error,omitempty"`
}

// maxAttachRequest bounds an attach request.
const maxAttachRequest = 64 << 10

// hotplugAlias is the libvirt alias of a VMI disk, as ConfigureDisks names it.
func hotplugAlias(volume string) string { return "ua-" + volume }

// AttachDisk sends req and the open disk f on conn (a connection to the
// launcher's HotplugSocketFile) and returns the disk's target.
func AttachDisk(ctx context.Context, conn net.Conn, req AttachRequest, f *os.File) (string, error) {
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return "", fmt.Errorf("attaching a disk needs a unix socket, not %T", conn)
	}
	if d, ok := ctx.Deadline(); ok {
		_ = uc.SetDeadline(d)
	}
	data, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	if _, _, err := uc.WriteMsgUnix(append(data, '\n'), unix.UnixRights(int(f.Fd())), nil); err != nil {
		return "", fmt.Errorf("sending disk %s to the launcher: %w", req.Disk.Name, err)
	}
	var reply AttachReply
	if err := json.NewDecoder(uc).Decode(&reply); err != nil {
		return "", fmt.Errorf("reading the launcher's answer for disk %s: %w", req.Disk.Name, err)
	}
	if reply.Error != "" {
		return "", errors.New(reply.Error)
	}
	return reply.Target, nil
}

// serveHotplug takes attach requests on sock until ctx ends.
func (s *server) serveHotplug(ctx context.Context, sock string) error {
	_ = os.Remove(sock)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	go func() {
		<-ctx.Done()
		_ = l.Close()
	}()
	for {
		conn, err := l.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			reply := s.attach(conn)
			data, _ := json.Marshal(reply)
			_, _ = conn.Write(append(data, '\n'))
		}()
	}
}

// attach reads one request and its descriptor from conn and attaches it.
func (s *server) attach(conn *net.UnixConn) AttachReply {
	req, f, err := readAttachRequest(conn)
	if err != nil {
		return AttachReply{Error: err.Error()}
	}
	defer f.Close()
	target, err := s.vm.AttachDisk(req, f)
	if err != nil {
		s.log.Error("hotplug attach failed", "disk", req.Disk.Name, "err", err)
		return AttachReply{Error: err.Error()}
	}
	s.log.Info("disk hotplugged", "disk", req.Disk.Name, "target", target)
	return AttachReply{Target: target}
}

// readAttachRequest reads a request line and the one descriptor sent
// with it; any other descriptor is closed.
func readAttachRequest(conn *net.UnixConn) (AttachRequest, *os.File, error) {
	var req AttachRequest
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	var data []byte
	buf := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4*4))
	for !bytes.Contains(data, []byte{'\n'}) {
		n, oobn, _, _, err := conn.ReadMsgUnix(buf, oob)
		if oobn > 0 {
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			for _, m := range msgs {
				fds, _ := unix.ParseUnixRights(&m)
				for _, fd := range fds {
					files = append(files, os.NewFile(uintptr(fd), "hotplug-disk"))
				}
			}
		}
		data = append(data, buf[:n]...)
		if err != nil || n == 0 || len(data) > maxAttachRequest {
			closeAll()
			return req, nil, fmt.Errorf("reading an attach request: %v (%d bytes)", err, len(data))
		}
	}
	if len(files) != 1 {
		closeAll()
		return req, nil, fmt.Errorf("an attach request carries one disk descriptor, not %d", len(files))
	}
	if err := json.Unmarshal(data[:bytes.IndexByte(data, '\n')], &req); err != nil {
		closeAll()
		return req, nil, fmt.Errorf("decoding an attach request: %w", err)
	}
	return req, files[0], nil
}

// AttachDisk attaches f, the disk of req, to the running domain with the
// VMI disk's bus and serial, on the first free target of its bus; a disk
// attached already answers with its target.
func (vm *VM) AttachDisk(req AttachRequest, f *os.File) (string, error) {
	disks, err := vm.liveDisks()
	if err != nil {
		return "", err
	}
	for _, d := range disks {
		if d.Alias != nil && d.Alias.Name == hotplugAlias(req.Disk.Name) {
			return d.Target.Dev, nil
		}
	}
	group := "hotplug-" + req.Disk.Name
	dd, err := domain.HotplugDisk(req.Disk, domain.Volume{Path: "/var/run/kubevirt/hotplug-disks/" + req.Disk.Name, Format: req.Format, ReadOnly: req.ReadOnly, FDGroup: group}, disks)
	if err != nil {
		return "", err
	}
	xml, err := dd.Marshal()
	if err != nil {
		return "", err
	}
	// QEMU opens a disk read-only first and reopens it read-write when it
	// writes (auto-read-only): a descriptor set needs one of each mode.
	files := []os.File{*f}
	if !req.ReadOnly {
		ro, err := os.OpenFile(fmt.Sprintf("/proc/self/fd/%d", f.Fd()), os.O_RDONLY, 0)
		if err != nil {
			return "", fmt.Errorf("disk %s read-only: %w", req.Disk.Name, err)
		}
		defer ro.Close()
		files = append(files, *ro)
	}
	if err := vm.dom.FDAssociate(group, files, 0); err != nil {
		return "", fmt.Errorf("passing disk %s to libvirt: %w", req.Disk.Name, err)
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
func (vm *VM) Disks() (map[string]string, error) {
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
	return out, nil
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
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAttachRequest)).Decode(&req); err != nil || req.Volume == "" {
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
