package hostpathcsi

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/tekvirt/tekvirt/images"
)

// copyTree copies the tree of the directory src into the directory dst,
// which must be empty: directories, regular files (blocks shared where the
// file system can, holes kept where not) and links (as links, never
// followed), with their modes and owners. It returns images.CloneReflink
// when every file shared its blocks, images.CloneSparse otherwise, and the
// bytes of the files copied.
func copyTree(src, dst string) (string, int64, error) {
	from, err := os.OpenRoot(src)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = from.Close() }()
	to, err := os.OpenRoot(dst)
	if err != nil {
		return "", 0, err
	}
	defer func() { _ = to.Close() }()
	method, size := images.CloneReflink, int64(0)
	err = fs.WalkDir(from.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." {
				if err := to.Mkdir(rel, 0o700); err != nil {
					return err
				}
			}
		case d.Type().IsRegular():
			m, n, err := copyFile(from, to, rel, info.Mode().Perm())
			if err != nil {
				return err
			}
			if m != images.CloneReflink {
				method = m
			}
			size += n
		case d.Type()&fs.ModeSymlink != 0:
			target, err := from.Readlink(rel)
			if err != nil {
				return err
			}
			if err := to.Symlink(target, rel); err != nil {
				return err
			}
		default:
			return nil // sockets, pipes, devices: a volume's data is none of them
		}
		return sameOwner(to, rel, info)
	})
	if err != nil {
		return "", 0, fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return method, size, nil
}

// copyFile copies the regular file rel of from to to. A file swapped for a
// link since the walk saw it is refused, not followed.
func copyFile(from, to *os.Root, rel string, perm fs.FileMode) (string, int64, error) {
	in, err := from.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return "", 0, err
	}
	if !st.Mode().IsRegular() {
		return "", 0, fmt.Errorf("%s is no longer a regular file", rel)
	}
	out, err := to.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return "", 0, err
	}
	method, err := images.CloneFile(in, out)
	if err == nil {
		err = out.Chmod(perm)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return method, st.Size(), err
}

// sameOwner gives rel of to the owner and mode of the source info.
func sameOwner(to *os.Root, rel string, info fs.FileInfo) error {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no owner in the file's information")
	}
	if err := to.Lchown(rel, int(st.Uid), int(st.Gid)); err != nil {
		return err
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		return nil
	}
	return to.Chmod(rel, info.Mode().Perm()|info.Mode()&(fs.ModeSetgid|fs.ModeSticky))
}
