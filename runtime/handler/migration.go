package handler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	crhandler "sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/runtime/launcher"
	"github.com/tekvirt/tekvirt/runtime/migration"
)

// Migrations is the node's part in live migrations: as a target, the
// server that takes the streams of the migrations it expects into the
// target Pods; as a source, the proxies that carry the source Pods'
// streams to the target node's server.
type Migrations struct {
	// Server takes the streams of migrations to this node.
	Server *migration.Server
	// Address is where Server listens (host:port), what a source dials.
	Address string
	Log     *slog.Logger

	mu      sync.Mutex
	sources map[types.UID]*migration.Source
	targets map[types.UID]*os.File
	// ends are the migrations from this node whose end is waited for.
	ends map[types.UID]bool
}

// LoadTLS is the TLS of the handlers' migration connections, from the
// certificate files in dir, read at each connection so that a renewed
// certificate takes over: the server's requires the peer's certificate,
// signed by the CA.
func LoadTLS(dir string) (server *tls.Config, client func(node string) *tls.Config) {
	load := func() (*tls.Certificate, *x509.CertPool, error) {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
		if err != nil {
			return nil, nil, err
		}
		ca, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
		if err != nil {
			return nil, nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, nil, errors.New("no CA certificate in " + filepath.Join(dir, "ca.crt"))
		}
		return &cert, pool, nil
	}
	server = &tls.Config{
		MinVersion: tls.VersionTLS13,
		ClientAuth: tls.RequireAndVerifyClientCert,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool, err := load()
			if err != nil {
				return nil, err
			}
			return &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{*cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}, nil
		},
	}
	client = func(node string) *tls.Config {
		cert, pool, err := load()
		if err != nil {
			// The dial fails with the handshake: no certificate to offer.
			return &tls.Config{MinVersion: tls.VersionTLS13, ServerName: node, RootCAs: x509.NewCertPool()}
		}
		return &tls.Config{MinVersion: tls.VersionTLS13, ServerName: node, RootCAs: pool, Certificates: []tls.Certificate{*cert}}
	}
	return server, client
}

// expect lets migration uid's streams into the target Pod whose network
// namespace is ns (the Migrations keep it open until forget).
func (m *Migrations) expect(uid types.UID, ns *os.File) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.targets == nil {
		m.targets = map[types.UID]*os.File{}
	}
	if old := m.targets[uid]; old != nil {
		_ = old.Close()
	}
	m.targets[uid] = ns
	m.Server.Expect(string(uid), ns)
}

func (m *Migrations) expecting(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.targets[uid] != nil
}

// forget ends what the node keeps for migration uid, as target or source.
func (m *Migrations) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.Server.Forget(string(uid))
	if ns := m.targets[uid]; ns != nil {
		_ = ns.Close()
		delete(m.targets, uid)
	}
	if s := m.sources[uid]; s != nil {
		s.Close()
		delete(m.sources, uid)
	}
	delete(m.ends, uid)
}

// awaitEnd says whether the caller should wait for the end of migration
// uid: once per migration.
func (m *Migrations) awaitEnd(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ends[uid] {
		return false
	}
	if m.ends == nil {
		m.ends = map[types.UID]bool{}
	}
	m.ends[uid] = true
	return true
}

// listenSource starts the source Pod's proxies of migration uid, once.
func (m *Migrations) listenSource(uid types.UID, ns *os.File, target string, conf *tls.Config) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sources[uid] != nil {
		return nil
	}
	s, err := migration.ListenSource(ns, string(uid), target, conf, m.Log, migration.Streams...)
	if err != nil {
		return err
	}
	if m.sources == nil {
		m.sources = map[types.UID]*migration.Source{}
	}
	m.sources[uid] = s
	return nil
}

// migrating is vmi's migration state while a migration runs (nil: none).
func migrating(vmi *v1.VirtualMachineInstance) *v1.VirtualMachineInstanceMigrationState {
	ms := vmi.Status.MigrationState
	if ms == nil || ms.Completed || ms.Failed || ms.MigrationUID == "" {
		return nil
	}
	return ms
}

// reconcileTarget prepares the target Pod of vmi's migration to this node
// (the VM's files, its network, a launcher waiting for the domain), says
// where the source may reach it, and takes the VMI over once the source
// says the domain moved.
func (h *Handler) reconcileTarget(ctx context.Context, vmi *v1.VirtualMachineInstance) (ctrl.Result, error) {
	ms := vmi.Status.MigrationState
	if ms == nil || ms.TargetNode != h.Node || h.Migrations == nil {
		return ctrl.Result{}, nil
	}
	if ms.Failed || (ms.AbortRequested && !ms.Completed) {
		h.Migrations.forget(ms.MigrationUID)
		return ctrl.Result{}, h.dropStaleDir(ctx, vmi)
	}
	if !h.Migrations.expecting(ms.MigrationUID) {
		// Once this handler expects the migration, its target is prepared.
		if err := h.dropStaleDir(ctx, vmi); err != nil {
			return ctrl.Result{}, err
		}
	}
	d, err := h.dirFor(vmi)
	if err != nil || d.pod.vm.Path == "" {
		return ctrl.Result{RequeueAfter: pollTarget}, err
	}
	if ms.Completed {
		return ctrl.Result{}, h.takeOver(ctx, vmi, d)
	}
	if ready, err := h.prepareTarget(ctx, vmi, d); !ready || err != nil {
		return ctrl.Result{RequeueAfter: pollTarget}, err
	}
	if ms.TargetNodeAddress == h.Migrations.Address {
		return ctrl.Result{RequeueAfter: pollRunning}, nil
	}
	return ctrl.Result{RequeueAfter: pollRunning}, h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) {
		ms.TargetNodeAddress = h.Migrations.Address
	})
}

// staleDir says whether the VM directory that spec prepared on node is
// left from before: the VMI runs on another node, and the directory is
// not the target of a migration to this node that is still under way
// (it was the VM's until it migrated away, or the target of a migration
// that failed, was cancelled, or was followed by another).
func staleDir(spec *launcher.Spec, vmi *v1.VirtualMachineInstance, node string) bool {
	if vmi.Status.NodeName == "" || vmi.Status.NodeName == node {
		return false
	}
	was, ms := spec.VMI.Status.MigrationState, vmi.Status.MigrationState
	current := spec.Incoming && was != nil && ms != nil && ms.MigrationUID == was.MigrationUID && ms.TargetNode == node &&
		!ms.Failed && (!ms.AbortRequested || ms.Completed)
	return !current
}

// dropStaleDir removes what vmi left on this node before (its launcher,
// its images mounted in its Pod), so that a migration to this node
// prepares its own target Pod.
func (h *Handler) dropStaleDir(ctx context.Context, vmi *v1.VirtualMachineInstance) error {
	spec, err := launcher.ReadSpec(h.dirOf(vmi.UID).path)
	if err != nil || !staleDir(spec, vmi, h.Node) {
		return nil //nolint:nilerr // no spec: nothing prepared here
	}
	// The Pod's volumes are those of the VMI the spec was written for.
	d, err := h.dirFor(spec.VMI)
	if err != nil {
		return err
	}
	var was types.UID
	if ms := spec.VMI.Status.MigrationState; ms != nil {
		was = ms.MigrationUID
	}
	ctrl.LoggerFrom(ctx).Info("removing what the VMI left on this node before", "vmi", klog.KObj(vmi), "migration", was)
	if err := d.stop(ctx, 0); err != nil {
		return err
	}
	return d.remove()
}

// prepareTarget readies the target Pod of vmi's migration: the VM's files
// and network, a launcher whose libvirtd takes the domain, and the
// node's server letting the migration's streams into the Pod. Not ready:
// try again soon.
func (h *Handler) prepareTarget(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) (bool, error) {
	ms := vmi.Status.MigrationState
	state, _, err := d.state()
	if err != nil {
		return false, err
	}
	if state == NotStarted {
		if err := h.launchIncoming(ctx, vmi, d); err != nil {
			if !errors.Is(err, errPodNotHere) { // the kubelet still starts the Pod
				ctrl.LoggerFrom(ctx).Info("migration target not prepared yet", "vmi", klog.KObj(vmi), "reason", err.Error())
			}
			return false, nil
		}
	}
	if _, err := d.pod.vm.ReadFile(launcher.TargetReadyFile, 64); err != nil {
		return false, nil // its libvirtd is not up yet
	}
	if !h.Migrations.expecting(ms.MigrationUID) {
		ns, err := d.podNetNS(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // the launcher does not answer yet
		}
		h.Migrations.expect(ms.MigrationUID, ns)
	}
	return true, nil
}

// launchIncoming prepares the target Pod as launch does a VM's first, with
// a spec that has its launcher receive the domain instead of starting it.
func (h *Handler) launchIncoming(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	if err := d.pod.ready(); err != nil {
		return err
	}
	// The target is handed over while the kubelet starts its Pod.
	spec, err := h.stagedSpec(ctx, vmi, d)
	if err != nil {
		return err
	}
	spec.Incoming = true
	if err := d.writeSpec(spec); err != nil {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("migration target prepared", "vmi", klog.KObj(vmi), "pod volume", d.pod.vm.Path)
	return nil
}

// takeOver makes this node the VMI's once the domain runs here: its node,
// the label the node's handler selects it by, and this node's exec
// address; from then on this handler reports the VM.
func (h *Handler) takeOver(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	st, err := d.client().Status(cctx)
	cancel()
	if err != nil {
		return fmt.Errorf("the migrated domain of %s does not answer here yet: %w", klog.KObj(vmi), err)
	}
	if st.Domain != "running" && st.Domain != "paused" {
		return fmt.Errorf("the migrated domain of %s is %s here, not running yet", klog.KObj(vmi), st.Domain)
	}
	h.Migrations.forget(vmi.Status.MigrationState.MigrationUID)
	base := vmi.DeepCopy()
	now := metav1.Now()
	vmi.Status.NodeName = h.Node
	vmi.Status.MigrationState.TargetNodeDomainDetected = true
	vmi.Status.MigrationState.TargetNodeDomainReadyTimestamp = &now
	if err := h.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("moving %s to node %s: %w", klog.KObj(vmi), h.Node, err)
	}
	base = vmi.DeepCopy()
	metav1.SetMetaDataLabel(&vmi.ObjectMeta, v1.NodeNameLabel, h.Node)
	if h.ExecAddress != "" {
		metav1.SetMetaDataAnnotation(&vmi.ObjectMeta, AddressAnnotation, h.ExecAddress)
	}
	if err := h.Client.Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("labelling %s with node %s: %w", klog.KObj(vmi), h.Node, err)
	}
	ctrl.LoggerFrom(ctx).Info("VMI migrated here", "vmi", klog.KObj(vmi), "from", vmi.Status.MigrationState.SourceNode)
	return nil
}

// driveSource runs vmi's migration from this node once its target is
// ready: the proxies of the source Pod's streams, the launcher's
// migration, and its outcome written into the migration state.
func (h *Handler) driveSource(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir, obs observation) error {
	ms := migrating(vmi)
	if ms == nil || ms.SourceNode != h.Node || h.Migrations == nil || ms.TargetNodeAddress == "" || obs.state != Running || obs.status == nil {
		return nil
	}
	if out := obs.status.Migration; ms.StartTimestamp != nil && out != nil {
		return h.sourceProgress(ctx, vmi, d, out)
	}
	if ms.StartTimestamp != nil || ms.AbortRequested {
		return nil
	}
	return h.startSource(ctx, vmi, d)
}

// startSource connects the source Pod's loopback to the target node and
// has the launcher start the migration.
func (h *Handler) startSource(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir) error {
	ms := vmi.Status.MigrationState
	ns, err := d.podNetNS(ctx)
	if err != nil {
		return err
	}
	defer ns.Close()
	if err := h.Migrations.listenSource(ms.MigrationUID, ns, ms.TargetNodeAddress, h.clientTLS(ms.TargetNode)); err != nil {
		return fmt.Errorf("carrying the migration of %s: %w", klog.KObj(vmi), err)
	}
	shared, err := h.claimsVerifiedShared(ctx, vmi)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = d.client().Migrate(cctx, launcher.MigrateRequest{Limits: limitsOf(ms.VMIMConfigurationOptions), SharedStorageVerified: shared})
	cancel()
	var op *launcher.OpError
	if err != nil && (!errors.As(err, &op) || op.Code != 409) {
		return fmt.Errorf("starting the migration of %s: %w", klog.KObj(vmi), err)
	}
	ctrl.LoggerFrom(ctx).Info("live migration started", "vmi", klog.KObj(vmi), "to", ms.TargetNode)
	h.wakeAtEnd(vmi, d)
	return h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) {
		now := metav1.Now()
		ms.StartTimestamp = &now
	})
}

// wakeAtEnd has vmi reconciled as soon as its launcher says the
// migration it runs ended, not at the next look: the target takes the VMI
// over once this node says the migration completed. Once per migration;
// the looks go on meanwhile.
func (h *Handler) wakeAtEnd(vmi *v1.VirtualMachineInstance, d vmDir) {
	if h.wake == nil || !h.Migrations.awaitEnd(vmi.Status.MigrationState.MigrationUID) {
		return
	}
	key := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, Name: vmi.Name}}
	go func() {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			st, err := d.client().WaitMigration(ctx)
			cancel()
			if err == nil && st != nil && st.State == launcher.MigrationRunning {
				continue
			}
			select {
			case h.wake <- event.TypedGenericEvent[*v1.VirtualMachineInstance]{Object: key}:
			default: // the looks see it
			}
			return
		}
	}()
}

// sourceProgress mirrors the launcher's migration into the migration
// state, aborts it when asked, and ends the node's part when it ended.
func (h *Handler) sourceProgress(ctx context.Context, vmi *v1.VirtualMachineInstance, d vmDir, out *launcher.MigrationStatus) error {
	ms := vmi.Status.MigrationState
	switch out.State {
	case launcher.MigrationRunning:
		h.wakeAtEnd(vmi, d)
		if ms.AbortRequested {
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			_ = d.client().AbortMigration(cctx)
			cancel()
		}
		if out.Mode == string(v1.MigrationPostCopy) && ms.Mode != v1.MigrationPostCopy {
			return h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) { ms.Mode = v1.MigrationPostCopy })
		}
		return nil
	case launcher.MigrationSucceeded:
		h.Migrations.forget(ms.MigrationUID)
		ctrl.LoggerFrom(ctx).Info("live migration completed", "vmi", klog.KObj(vmi), "to", ms.TargetNode, "endedAt", out.EndedAt)
		return h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) {
			end := metav1.NewTime(out.EndedAt)
			ms.Completed, ms.EndTimestamp = true, &end
		})
	}
	h.Migrations.forget(ms.MigrationUID)
	return h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) {
		end := metav1.NewTime(out.EndedAt)
		ms.Failed, ms.FailureReason, ms.EndTimestamp = true, out.Failure, &end
		if ms.AbortRequested {
			ms.AbortStatus = v1.MigrationAbortSucceeded
		}
	})
}

// migratedAway ends the source's part of a migration whose domain moved:
// the launcher recorded it (its Pod completes); the VMI is the target's.
func (h *Handler) migratedAway(ctx context.Context, vmi *v1.VirtualMachineInstance, exit *launcher.Exited) error {
	ms := vmi.Status.MigrationState
	if ms == nil {
		return nil
	}
	h.Migrations.forget(ms.MigrationUID)
	if ms.Completed {
		return nil
	}
	ctrl.LoggerFrom(ctx).Info("live migration completed", "vmi", klog.KObj(vmi), "to", ms.TargetNode, "endedAt", exit.At)
	return h.patchMigration(ctx, vmi, func(ms *v1.VirtualMachineInstanceMigrationState) {
		end := metav1.NewTime(exit.At)
		ms.Completed, ms.EndTimestamp = true, &end
	})
}

// patchMigration changes the VMI's migration state.
func (h *Handler) patchMigration(ctx context.Context, vmi *v1.VirtualMachineInstance, f func(*v1.VirtualMachineInstanceMigrationState)) error {
	base := vmi.DeepCopy()
	f(vmi.Status.MigrationState)
	if equality.Semantic.DeepEqual(base.Status, vmi.Status) {
		return nil
	}
	if err := h.Client.Status().Patch(ctx, vmi, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("reporting the migration of %s: %w", klog.KObj(vmi), err)
	}
	return nil
}

func (h *Handler) clientTLS(node string) *tls.Config {
	if h.MigrationClientTLS == nil {
		return &tls.Config{MinVersion: tls.VersionTLS13, ServerName: node}
	}
	return h.MigrationClientTLS(node)
}

// limitsOf are the launcher's limits from the migration's configuration.
func limitsOf(o *v1.VMIMConfigurationOptions) launcher.MigrationLimits {
	l := launcher.MigrationLimits{CompletionTimeoutPerGiB: 150, ProgressTimeout: 150}
	if o == nil {
		return l
	}
	if o.CompletionTimeoutPerGiB != nil {
		l.CompletionTimeoutPerGiB = *o.CompletionTimeoutPerGiB
	}
	if o.ProgressTimeout != nil {
		l.ProgressTimeout = *o.ProgressTimeout
	}
	if o.BandwidthPerMigration != nil {
		l.BandwidthMiB = uint64(o.BandwidthPerMigration.Value() >> 20)
	}
	l.AllowAutoConverge = o.AllowAutoConverge != nil && *o.AllowAutoConverge
	l.AllowPostCopy = o.AllowPostCopy != nil && *o.AllowPostCopy
	l.AllowWorkloadDisruption = o.AllowWorkloadDisruption != nil && *o.AllowWorkloadDisruption
	if o.MaxDowntimeMs != nil {
		l.MaxDowntimeMs = *o.MaxDowntimeMs
	}
	return l
}

// SetupMigrations serves live migrations to this node on addr (host:port,
// also what sources dial) with the handlers' certificates in certDir, and
// watches the VMIs migrating here, which the manager's cache of this
// node's VMIs does not hold.
func (h *Handler) SetupMigrations(mgr ctrl.Manager, addr, certDir string) error {
	serverTLS, clientTLS := LoadTLS(certDir)
	log := slog.New(logr.ToSlogHandler(mgr.GetLogger().WithName("migration")))
	h.Migrations = &Migrations{Server: &migration.Server{TLS: serverTLS, Log: log}, Address: addr, Log: log}
	h.MigrationClientTLS = clientTLS
	targets, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), ByObject: map[client.Object]cache.ByObject{
		&v1.VirtualMachineInstance{}: {Label: labels.SelectorFromSet(labels.Set{v1.MigrationTargetNodeNameLabel: h.Node})},
	}})
	if err != nil {
		return fmt.Errorf("the cache of VMIs migrating here: %w", err)
	}
	if err := mgr.Add(targets); err != nil {
		return err
	}
	h.TargetReader = targets
	err = ctrl.NewControllerManagedBy(mgr).Named("vmi-migration-target").
		WatchesRawSource(source.Kind(targets, &v1.VirtualMachineInstance{}, &crhandler.TypedEnqueueRequestForObject[*v1.VirtualMachineInstance]{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(h)
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("listening for migrations on %s: %w", addr, err)
		}
		go func() {
			<-ctx.Done()
			_ = l.Close()
			h.Migrations.Server.Close()
		}()
		log.Info("serving live migrations", "addr", addr)
		return h.Migrations.Server.Serve(l)
	}))
}
