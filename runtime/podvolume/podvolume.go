package podvolume

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Dir is a Pod volume's directory on the node.
type Dir struct {
	Path string
	// Owner, when set, is given the files written in the volume: the
	// Pod's user, who may then write them too.
	Owner *Owner
}

// Owner is a user and group.
type Owner struct{ UID, GID int }

func (d Dir) root() (*os.Root, error) {
	r, err := os.OpenRoot(d.Path)
	if err != nil {
		return nil, fmt.Errorf("opening the Pod volume %s: %w", d.Path, err)
	}
	return r, nil
}

// Install copies the file src (in a directory only the handler writes)
// into the volume as name, replacing whatever entry had that name (a link
// included, which is replaced, not followed).
func (d Dir) Install(src, name string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	return d.write(name, f)
}

// WriteFile stores data as name, replacing whatever entry had that name.
func (d Dir) WriteFile(name string, data []byte) error {
	return d.write(name, bytes.NewReader(data))
}

func (d Dir) write(name string, r io.Reader) error {
	root, err := d.root()
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	var suffix [8]byte
	_, _ = rand.Read(suffix[:])
	tmp := ".tekvirt-" + hex.EncodeToString(suffix[:])
	// O_EXCL: a name the tenant guessed and planted is refused, not used.
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("writing %s in %s: %w", name, d.Path, err)
	}
	_, err = io.Copy(f, r)
	if err == nil && d.Owner != nil {
		err = f.Chown(d.Owner.UID, d.Owner.GID)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("writing %s in %s: %w", name, d.Path, err)
	}
	return nil
}

// ReadFile reads name if it is a regular file beneath the directory of at
// most max bytes; anything else (a FIFO, a device) is refused without
// waiting on it.
func (d Dir) ReadFile(name string, max int64) ([]byte, error) {
	root, err := d.root()
	if err != nil {
		return nil, err
	}
	defer func() { _ = root.Close() }()
	// O_NONBLOCK: a FIFO planted under the name would otherwise hold the
	// open, and the handler's worker with it, until someone writes.
	f, err := root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s in %s is not a regular file (%s)", name, d.Path, st.Mode().Type())
	}
	if st.Size() > max {
		return nil, fmt.Errorf("%s in %s is %d bytes, more than %d", name, d.Path, st.Size(), max)
	}
	return io.ReadAll(io.LimitReader(f, max))
}

// DialUnix connects to the socket name in the directory. The entry is
// opened without following links and must be a socket; the connection goes
// through that open entry, so a link or a swap after the check reaches
// nothing else.
func (d Dir) DialUnix(ctx context.Context, name string) (net.Conn, error) {
	dir, err := unix.Open(d.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", d.Path, err)
	}
	defer func() { _ = unix.Close(dir) }()
	fd, err := unix.Openat(dir, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the socket %s in %s: %w", name, d.Path, err)
	}
	defer func() { _ = unix.Close(fd) }()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("%s in %s is not a socket", name, d.Path)
	}
	var dialer net.Dialer
	return dialer.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}

// Mounted reports whether the entry name is a mount point.
func (d Dir) Mounted(name string) (bool, error) {
	var parent, child unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, d.Path, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &parent)
	if errors.Is(err, unix.ENOENT) {
		return false, nil // the volume is gone, and what was mounted in it
	}
	if err != nil {
		return false, err
	}
	err = unix.Statx(unix.AT_FDCWD, filepath.Join(d.Path, name), unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID, &child)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return child.Mnt_id != parent.Mnt_id, nil
}

// MountReadOnly makes the directory src appear, read-only (and nosuid,
// nodev, noexec), at the subdirectory name, which it creates. The mount is
// read-only before it is attached, so no copy of it propagates writable,
// and it is attached to the directory opened without following links.
func (d Dir) MountReadOnly(src, name string) error {
	return d.mount(src, name, unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// Mount makes the directory src appear at the subdirectory name, which it
// creates, nosuid and nodev, read-only when readOnly: a volume's data
// where a Pod uses it. Like MountReadOnly it never follows a link at name.
func (d Dir) Mount(src, name string, readOnly bool) error {
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if readOnly {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	return d.mount(src, name, attr)
}

func (d Dir) mount(src, name string, attrs uint64) error {
	if ok, err := d.Mounted(name); err != nil || ok {
		return err
	}
	root, err := d.root()
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	if err := root.Mkdir(name, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("making the mount point %s in %s: %w", name, d.Path, err)
	}
	dir, err := unix.Open(d.Path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(dir) }()
	target, err := unix.Openat(dir, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("opening the mount point %s in %s: %w", name, d.Path, err)
	}
	defer func() { _ = unix.Close(target) }()
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("cloning %s: %w", src, err)
	}
	defer func() { _ = unix.Close(tree) }()
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: attrs}); err != nil {
		return fmt.Errorf("setting the attributes of the mount of %s: %w", src, err)
	}
	if err := unix.MoveMount(tree, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return fmt.Errorf("mounting %s at %s in %s: %w", src, name, d.Path, err)
	}
	return nil
}

// Unmount detaches what is mounted at name (never following a link there)
// and removes the then empty mount point; a name that is not there is not
// an error.
func (d Dir) Unmount(name string) error {
	p := filepath.Join(d.Path, name)
	for {
		ok, err := d.Mounted(name)
		if err != nil || !ok {
			break
		}
		if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil {
			return fmt.Errorf("unmounting %s: %w", p, err)
		}
	}
	root, err := d.root()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	// Remove, not RemoveAll: a mount point is empty once unmounted.
	if err := root.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the mount point %s in %s: %w", name, d.Path, err)
	}
	return nil
}
