package migration

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/tekvirt/tekvirt/runtime/podnet"
)

// sink serves stream st as QEMU receiving a migration would: it reads
// everything, then answers one byte.
func sink(b *testing.B, ns *os.File, st Stream) {
	b.Helper()
	servePod(b, ns, st, func(c net.Conn) {
		defer func() { _ = c.Close() }()
		_, _ = io.Copy(io.Discard, c)
		_, _ = c.Write([]byte{1})
	})
}

// BenchmarkMemoryStream moves 256 MiB per iteration on a Pod's loopback:
// "loopback" straight to a reader in the same Pod (the baseline), "proxied"
// from the source Pod's loopback through both proxies (TLS between them) to
// the target Pod's, as a migration's memory stream goes. Compare their
// MB/s.
func BenchmarkMemoryStream(b *testing.B) {
	src, dst, same := podNamespace(b, "bsrc"), podNamespace(b, "bdst"), podNamespace(b, "bsame")
	creds := newHandlerTLS(b)
	sink(b, dst, Memory)
	sink(b, same, Memory)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := &Server{TLS: creds.server, Log: log}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	defer srv.Close()
	go func() { _ = srv.Serve(l) }()
	srv.Expect("mig-1", dst)
	proxy, err := ListenSource(src, "mig-1", l.Addr().String(), creds.client("node2"), log, Memory)
	if err != nil {
		b.Fatal(err)
	}
	defer proxy.Close()
	b.Run("loopback", func(b *testing.B) { send(b, same) })
	b.Run("proxied", func(b *testing.B) { send(b, src) })
}

// send writes 256 MiB an iteration to the memory stream's port in ns and
// waits for the reader's answer.
func send(b *testing.B, ns *os.File) {
	chunk := make([]byte, 1<<20)
	const size = 256 << 20
	b.SetBytes(size)
	for range b.N {
		c, err := podnet.Dial(context.Background(), ns, "tcp", Memory.Addr())
		if err != nil {
			b.Fatal(err)
		}
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				b.Fatal(err)
			}
		}
		_ = c.(*net.TCPConn).CloseWrite()
		if _, err := io.ReadAll(c); err != nil {
			b.Fatal(err)
		}
		_ = c.Close()
	}
}
