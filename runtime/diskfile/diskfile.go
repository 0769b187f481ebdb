package diskfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrUnsafe marks a disk file that is refused: a symlink, a path that
// leaves its directory, a hard link, or something that is not a disk.
var ErrUnsafe = errors.New("unsafe disk file")

// Open opens name inside dir, read-only or read-write. The directory
// itself is trusted (the node made it); what is inside it is not.
func Open(dir, name string, write bool) (*os.File, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", dir, err)
	}
	defer func() { _ = unix.Close(d) }()
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_RDWR
	}
	// O_NONBLOCK so that a FIFO planted as the disk cannot hang the open;
	// it is cleared once the file is known to be a disk.
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	}
	path := filepath.Join(dir, name)
	fd, err := unix.Openat2(d, name, how)
	switch {
	case errors.Is(err, unix.ELOOP):
		return nil, fmt.Errorf("%w: %s is a symbolic link; a volume's disk must be a regular file or a block device", ErrUnsafe, path)
	case errors.Is(err, unix.EXDEV):
		return nil, fmt.Errorf("%w: %s leads out of its volume", ErrUnsafe, path)
	case err != nil:
		return nil, fmt.Errorf("opening %s: %w", path, &os.PathError{Op: "openat2", Path: path, Err: err})
	}
	f := os.NewFile(uintptr(fd), path)
	if err := check(f); err != nil {
		f.Close()
		return nil, err
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return f, nil
}

// check accepts a regular file with a single name, or a block device.
func check(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFBLK:
		return nil
	case unix.S_IFREG:
		// Another name of the same file could be another volume's disk.
		if st.Nlink != 1 {
			return fmt.Errorf("%w: %s has %d names (hard links); a volume's disk must have one", ErrUnsafe, f.Name(), st.Nlink)
		}
		return nil
	}
	return fmt.Errorf("%w: %s is not a regular file or a block device (mode %#o)", ErrUnsafe, f.Name(), st.Mode&unix.S_IFMT)
}

// Chown gives f, opened by Open, to uid:gid unless they own it already: the
// user that runs QEMU must open a claim's disk whichever user (a task's, an
// importer's) wrote it. A block device is left as it is.
func Chown(f *os.File, uid, gid int) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat %s: %w", f.Name(), err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (int(st.Uid) == uid && int(st.Gid) == gid) {
		return nil
	}
	if err := unix.Fchown(int(f.Fd()), uid, gid); err != nil {
		return fmt.Errorf("giving %s to %d:%d: %w", f.Name(), uid, gid, err)
	}
	return nil
}
