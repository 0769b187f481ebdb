package migration

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
)

// Stream is one connection of a migration.
type Stream string

// The streams of a migration, each on its own port of the launcher Pods'
// loopback (the memory and disks ports are KubeVirt's).
const (
	// Libvirt is the source libvirtd's connection to the target's, which
	// the target launcher forwards to its libvirtd's socket.
	Libvirt Stream = "libvirt"
	// Memory is QEMU's migration stream.
	Memory Stream = "memory"
	// Disks is the NBD connection that copies the local disks.
	Disks Stream = "disks"
)

// Streams are every stream of a migration, in the order they open.
var Streams = []Stream{Libvirt, Memory, Disks}

var ports = map[Stream]int{Libvirt: 49151, Memory: 49152, Disks: 49153}

// Port is the stream's port on a launcher Pod's loopback.
func (s Stream) Port() int { return ports[s] }

// Addr is the stream's address on a launcher Pod's loopback.
func (s Stream) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())) }

// URI is the stream's address as libvirt's migration parameters take it
// (tcp://127.0.0.1:PORT): the same string on both sides, each Pod's own
// loopback.
func (s Stream) URI() string { return "tcp://" + s.Addr() }

// header opens every connection between the handlers: which migration
// (its key) and which of its streams the bytes after it belong to.
type header struct {
	Key    string `json:"key"`
	Stream Stream `json:"stream"`
}

// maxHeader bounds what a peer may send before the stream's bytes.
const maxHeader = 1024

var errBadHeader = errors.New("not a migration stream header")

func writeHeader(w io.Writer, h header) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readHeader reads the header line; the reader it returns has the bytes
// read past it.
func readHeader(c io.Reader) (header, *bufio.Reader, error) {
	r := bufio.NewReaderSize(io.LimitReader(c, maxHeader), maxHeader)
	line, err := r.ReadSlice('\n')
	if err != nil {
		return header{}, nil, fmt.Errorf("%w: %w", errBadHeader, err)
	}
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return header{}, nil, fmt.Errorf("%w: %w", errBadHeader, err)
	}
	if _, ok := ports[h.Stream]; !ok || h.Key == "" {
		return header{}, nil, fmt.Errorf("%w: stream %q of %q", errBadHeader, h.Stream, h.Key)
	}
	// What the buffer holds past the line is the stream's start; the rest
	// comes from the connection itself, beyond the header's limit.
	rest := bufio.NewReader(io.MultiReader(io.LimitReader(r, int64(r.Buffered())), c))
	return h, rest, nil
}
