package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/tekvirt/tekvirt/contracts/guestexec"
	"github.com/tekvirt/tekvirt/runtime/agent"
)

// guestPoll is how often the guest agent is asked about the guest: often
// until it first answers, since "agent connected" is what users wait for.
const (
	guestPollFast = 250 * time.Millisecond
	guestPollSlow = 5 * time.Second
)

// server answers the handler on the launcher's socket.
type server struct {
	vm      *VM
	started time.Time
	log     *slog.Logger
	// podIPs and macs are reported with every status.
	podIPs []string
	macs   map[string]string
	// guest is where port-forward streams lead (guestAddress).
	guest netip.Addr
	// creds keeps the guest's access credentials in step (nil: none).
	creds *credentials

	mu     sync.Mutex
	status Status
	// stopping is set once a shutdown was asked for.
	stopping bool
}

func newServer(vm *VM, log *slog.Logger) *server {
	return &server{vm: vm, started: time.Now(), log: log}
}

// serve listens on sock until ctx ends.
func (s *server) serve(ctx context.Context, sock string) error {
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", sock, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", s.handleStatus)
	mux.HandleFunc("GET /stats", s.handleStats)
	mux.HandleFunc("POST /exec", s.handleExec)
	mux.HandleFunc("POST /shutdown", s.handleShutdown)
	mux.HandleFunc("POST /migrate", s.handleMigrate)
	mux.HandleFunc("POST /migrate/abort", s.handleAbortMigration)
	mux.HandleFunc("GET /migrate/wait", s.handleMigrationWait)
	mux.HandleFunc("POST /hotplug/attach", s.handleAttach)
	mux.HandleFunc("POST /hotplug/detach", s.handleDetach)
	s.routeGuest(mux)
	mux.HandleFunc("GET "+PortForwardPath+"{protocol}/{port}", s.handlePortForward)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// pollGuest keeps the cached guest state fresh until ctx ends.
func (s *server) pollGuest(ctx context.Context) {
	c := s.vm.Agent()
	for {
		connected := s.refresh(ctx, c)
		wait := guestPollFast
		if connected {
			wait = guestPollSlow
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

func (s *server) refresh(ctx context.Context, c *agent.Client) bool {
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st := Status{AgentConnected: c.Ping(pctx) == nil}
	if st.AgentConnected {
		if info, err := c.OSInfo(pctx); err == nil {
			st.OSInfo = &info
		}
		st.Hostname, _ = c.Hostname(pctx)
		st.Interfaces, _ = c.Interfaces(pctx)
	}
	if s.creds != nil {
		cctx, cancel := context.WithTimeout(ctx, agentTimeout)
		st.AccessCredentials = s.creds.sync(cctx, c, st.AgentConnected)
		cancel()
	}
	s.mu.Lock()
	if st.AgentConnected != s.status.AgentConnected {
		s.log.Info("guest agent", "connected", st.AgentConnected, "after", time.Since(s.started).Round(time.Millisecond).String())
	}
	s.status = st
	s.mu.Unlock()
	return st.AgentConnected
}

func (s *server) handleStatus(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	st := s.status
	s.mu.Unlock()
	st.Domain = s.vm.State()
	st.StartedAt = s.started
	st.PodIPs, st.MACs = s.podIPs, s.macs
	st.Migration = s.vm.out.get()
	if disks, err := s.vm.Disks(); err == nil {
		st.Disks = disks
	}
	writeJSON(w, st)
}

func (s *server) handleMigrate(w http.ResponseWriter, r *http.Request) {
	var req MigrateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("bad migrate request: %v", err), http.StatusBadRequest)
		return
	}
	if s.stopRequested() {
		http.Error(w, "the VM is stopping", http.StatusConflict)
		return
	}
	if err := s.vm.out.start(s.vm, req, s.log); err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	s.log.Info("live migration started", "limits", fmt.Sprintf("%+v", req.Limits))
	writeJSON(w, map[string]string{"status": MigrationRunning})
}

// migrationWaitMax bounds one wait for a migration's end.
const migrationWaitMax = 30 * time.Second

// handleMigrationWait answers with the migration's status once it is no
// longer running, or after migrationWaitMax: the handler learns of the end
// at once, not at its next look (null: no migration ran).
func (s *server) handleMigrationWait(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, s.vm.out.ended(r.Context(), migrationWaitMax))
}

func (s *server) handleAbortMigration(w http.ResponseWriter, _ *http.Request) {
	if st := s.vm.out.get(); st == nil || st.State != MigrationRunning {
		http.Error(w, "no migration is running", http.StatusConflict)
		return
	}
	s.vm.out.cancel("Live migration aborted")
	writeJSON(w, map[string]string{"status": "aborting"})
}

func (s *server) handleStats(w http.ResponseWriter, _ *http.Request) {
	st, err := s.vm.Stats()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	writeJSON(w, st)
}

func (s *server) handleExec(w http.ResponseWriter, r *http.Request) {
	var req guestexec.Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Command == "" {
		http.Error(w, fmt.Sprintf("bad exec request: %v", err), http.StatusBadRequest)
		return
	}
	timeout := time.Duration(req.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	res, err := s.vm.Agent().Exec(ctx, req.Command, req.Args, 20*time.Millisecond)
	if err != nil {
		code := http.StatusBadGateway
		if errors.Is(err, agent.ErrTimeout) {
			code = http.StatusGatewayTimeout
		}
		http.Error(w, err.Error(), code)
		return
	}
	writeJSON(w, guestexec.Result{ExitCode: res.ExitCode, Stdout: res.Stdout, Stderr: res.Stderr, Truncated: res.Truncated})
}

func (s *server) handleShutdown(w http.ResponseWriter, r *http.Request) {
	var req struct {
		GraceSeconds int64 `json:"graceSeconds"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, fmt.Sprintf("bad shutdown request: %v", err), http.StatusBadRequest)
		return
	}
	s.stop(time.Duration(req.GraceSeconds) * time.Second)
	writeJSON(w, map[string]string{"status": "stopping"})
}

// stop powers the guest off, destroying the domain after grace. Repeated
// calls only shorten nothing: the first grace period holds.
func (s *server) stop(grace time.Duration) {
	s.mu.Lock()
	first := !s.stopping
	s.stopping = true
	s.mu.Unlock()
	if !first {
		return
	}
	s.log.Info("stopping the domain", "grace", grace.String())
	if grace > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		if err := s.vm.Shutdown(ctx); err != nil {
			s.log.Error("asking the guest to shut down", "err", err)
		}
		cancel()
	}
	time.AfterFunc(grace, func() {
		if err := s.vm.Destroy(); err != nil {
			s.log.Error("destroying after the grace period", "err", err)
		}
	})
}

func (s *server) stopRequested() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
