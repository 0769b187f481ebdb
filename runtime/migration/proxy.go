package migration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/tekvirt/tekvirt/runtime/podnet"
)

// dialTimeout bounds each connection a proxy makes.
const dialTimeout = 10 * time.Second

// streamBuffer bounds the kernel's buffers of each connection a proxy
// carries. Left to autotuning, the four sockets between the two QEMUs
// would hold tens of megabytes: QEMU counts what it wrote into them as
// sent, switches over with that still on its way, and the guest stays
// paused until it arrives. A loopback or node link needs far less to run
// at full speed.
const streamBuffer = 512 << 10

// bound sets c's kernel buffers to streamBuffer.
func bound(c net.Conn) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if t, ok := c.(*net.TCPConn); ok {
		_ = t.SetReadBuffer(streamBuffer)
		_ = t.SetWriteBuffer(streamBuffer)
	}
}

// Source listens on a source launcher Pod's loopback, one port a stream,
// and carries every connection there to the target node's handler.
type Source struct {
	listeners []net.Listener
	conns     tracked
	wg        sync.WaitGroup
}

// ListenSource listens in the source Pod's network namespace ns for each
// of streams and carries each connection to the handler at target
// (host:port) over TLS (tlsConf names the target handler and holds this
// handler's certificate), as a stream of the migration key.
func ListenSource(ns *os.File, key, target string, tlsConf *tls.Config, log *slog.Logger, streams ...Stream) (*Source, error) {
	s := &Source{}
	for _, st := range streams {
		l, err := podnet.Listen(ns, "tcp", st.Addr())
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("migration %s, stream %s: %w", key, st, err)
		}
		s.listeners = append(s.listeners, l)
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.accept(l, func() (net.Conn, error) {
				return dialTarget(target, tlsConf, header{Key: key, Stream: st})
			}, log.With("migration", key, "stream", st))
		}()
	}
	return s, nil
}

func (s *Source) accept(l net.Listener, dial func() (net.Conn, error), log *slog.Logger) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		s.conns.add(c)
		go func() {
			defer s.conns.remove(c)
			peer, err := dial()
			if err != nil {
				log.Error("connecting to the target handler", "err", err)
				_ = c.Close()
				return
			}
			s.conns.add(peer)
			defer s.conns.remove(peer)
			bound(c)
			bound(peer)
			splice(c, peer)
		}()
	}
}

// Close stops listening and ends the connections carried.
func (s *Source) Close() {
	for _, l := range s.listeners {
		_ = l.Close()
	}
	s.wg.Wait()
	s.conns.closeAll()
}

func dialTarget(addr string, tlsConf *tls.Config, h header) (net.Conn, error) {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: dialTimeout, KeepAlive: 15 * time.Second}, Config: tlsConf}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", addr, err)
	}
	if err := writeHeader(c, h); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("opening stream %s at %s: %w", h.Stream, addr, err)
	}
	return c, nil
}

// Server is the target side: it accepts handlers' TLS connections and
// connects each stream of an expected migration to its port on the
// target Pod's loopback. A connection for a migration it does not expect
// is closed unanswered.
type Server struct {
	// TLS must require and verify client certificates (the handlers').
	TLS *tls.Config
	Log *slog.Logger

	mu      sync.Mutex
	targets map[string]*os.File
	conns   tracked
}

// Expect lets streams of migration key through to the target Pod whose
// network namespace is ns, until Forget.
func (s *Server) Expect(key string, ns *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.targets == nil {
		s.targets = map[string]*os.File{}
	}
	s.targets[key] = ns
}

// Forget stops accepting streams of migration key; streams open go on
// until either side ends them.
func (s *Server) Forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.targets, key)
}

func (s *Server) target(key string) *os.File {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets[key]
}

// Serve accepts connections on l (a plain TCP listener: Serve does the
// TLS) until l is closed.
func (s *Server) Serve(l net.Listener) error {
	if s.TLS == nil || s.TLS.ClientAuth != tls.RequireAndVerifyClientCert {
		return errors.New("the migration server needs TLS that requires and verifies client certificates")
	}
	tl := tls.NewListener(l, s.TLS)
	for {
		c, err := tl.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go s.serve(c.(*tls.Conn))
	}
}

func (s *Server) serve(c *tls.Conn) {
	s.conns.add(c)
	defer s.conns.remove(c)
	_ = c.SetDeadline(time.Now().Add(dialTimeout))
	if err := c.Handshake(); err != nil {
		s.Log.Info("refused a migration connection", "peer", c.RemoteAddr().String(), "err", err)
		_ = c.Close()
		return
	}
	h, rest, err := readHeader(c)
	if err != nil {
		s.Log.Info("refused a migration connection", "peer", c.RemoteAddr().String(), "err", err)
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	log := s.Log.With("migration", h.Key, "stream", h.Stream)
	ns := s.target(h.Key)
	if ns == nil {
		log.Info("refused a stream of a migration this node does not expect", "peer", c.RemoteAddr().String())
		_ = c.Close()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	defer cancel()
	pod, err := podnet.Dial(ctx, ns, "tcp", h.Stream.Addr())
	if err != nil {
		log.Error("connecting the stream to the target Pod", "err", err)
		_ = c.Close()
		return
	}
	s.conns.add(pod)
	defer s.conns.remove(pod)
	bound(c)
	bound(pod)
	splice(readerConn{Conn: c, r: rest}, pod)
}

// Close ends every connection the server carries (the listener is the
// caller's).
func (s *Server) Close() { s.conns.closeAll() }

// readerConn reads what a buffered reader holds first.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (c readerConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// Forward carries every connection l accepts to what dial connects, until
// l is closed; connections open go on until either side ends them. A
// migration's target launcher forwards the Libvirt stream's port on its
// Pod's loopback to its libvirtd's socket with it.
func Forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			peer, err := dial()
			if err != nil {
				_ = c.Close()
				return
			}
			splice(c, peer)
		}()
	}
}

// splice copies both ways until both directions end, passing each end of
// stream on as a half close, then closes both.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// tracked are the open connections of a proxy.
type tracked struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func (t *tracked) add(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.conns == nil {
		t.conns = map[net.Conn]struct{}{}
	}
	t.conns[c] = struct{}{}
}

func (t *tracked) remove(c net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.conns, c)
}

func (t *tracked) closeAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for c := range t.conns {
		_ = c.Close()
	}
}
