package guest

import (
	"fmt"
	"io"
	"sort"
)

// cpioEntry is one file of an initramfs archive.
type cpioEntry struct {
	mode uint32 // type and permission bits, as in stat(2)
	data []byte // file content or symlink target
}

const (
	modeDir     = 0o040000
	modeFile    = 0o100000
	modeSymlink = 0o120000
)

// writeCPIO writes entries in the "newc" format the kernel unpacks, in path
// order so that directories precede their contents and output is stable.
func writeCPIO(w io.Writer, entries map[string]cpioEntry) error {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	ino := 1
	for _, n := range names {
		if err := writeCPIOEntry(w, ino, n, entries[n]); err != nil {
			return fmt.Errorf("cpio %s: %w", n, err)
		}
		ino++
	}
	return writeCPIOEntry(w, ino, "TRAILER!!!", cpioEntry{})
}

func writeCPIOEntry(w io.Writer, ino int, name string, e cpioEntry) error {
	nlink := 1
	if e.mode&0o170000 == modeDir {
		nlink = 2
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, 0, 0, len(name)+1, 0)
	if _, err := io.WriteString(w, hdr+name+"\x00"); err != nil {
		return err
	}
	if err := pad(w, len(hdr)+len(name)+1); err != nil {
		return err
	}
	if _, err := w.Write(e.data); err != nil {
		return err
	}
	return pad(w, len(e.data))
}

// pad aligns to 4 bytes as newc requires after the name and the data.
func pad(w io.Writer, n int) error {
	if r := n % 4; r != 0 {
		_, err := w.Write(make([]byte, 4-r))
		return err
	}
	return nil
}
