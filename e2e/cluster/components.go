package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

const (
	// NodeRoot holds the handler's VM directories, the containerDisk cache
	// and the volume pool, outside Home (which may be a private home
	// directory) at the path a node of a real cluster would use.
	NodeRoot = "/var/lib/tekvirt"
	// SharedRoot is the tekvirt-shared class's directory. It is not among
	// nodeBinds: every node of the testbed sees this machine's one
	// directory, as every node of a real cluster would see the one file
	// system its administrator mounts there.
	SharedRoot = "/var/lib/tekvirt-shared"
)

// processes lists the daemons in start order.
func (c *Cluster) processes(b binaries) []*process {
	pki := func(f string) string { return filepath.Join(c.pkiDir(), f) }
	etc := func(f string) string { return c.path("etc", f) }
	apiAddr := net.JoinHostPort("0.0.0.0", strconv.Itoa(APIServerPort))
	return []*process{
		{
			name: "registry", binary: b.testbed(),
			args: []string{"registry", "--addr", RegistryAddr, "--dir", c.path("data", "registry"),
				"--files-addr", c.guestFilesAddr(), "--files-dir", c.GuestDir(),
				"--cluster-addr", c.registryNodeAddr(), "--pusher", c.NodeIP.String(), "--pusher", "127.0.0.1"},
			ports: []string{RegistryAddr, c.guestFilesAddr(), c.registryNodeAddr()}, ready: httpReady(nil, "http://"+RegistryAddr+"/v2/"),
		},
		{
			name: "etcd", binary: "/usr/bin/etcd",
			args: []string{"--name", "tekvirt", "--data-dir", c.path("data", "etcd"),
				"--listen-client-urls", "http://" + etcdClientAddr, "--advertise-client-urls", "http://" + etcdClientAddr,
				"--listen-peer-urls", "http://" + etcdPeerAddr, "--initial-advertise-peer-urls", "http://" + etcdPeerAddr,
				"--initial-cluster", "tekvirt=http://" + etcdPeerAddr, "--unsafe-no-fsync"},
			env:   []string{"ETCD_UNSUPPORTED_ARCH=amd64"},
			ports: []string{etcdClientAddr, etcdPeerAddr}, ready: httpReady(nil, "http://"+etcdClientAddr+"/health"),
		},
		{
			name: "kube-apiserver", binary: b.k("kube-apiserver"),
			args:  c.apiServerArgs(),
			ports: []string{apiAddr}, ready: c.apiReady(), readyTimeout: 2 * time.Minute,
		},
		{
			name: "kube-controller-manager", binary: b.k("kube-controller-manager"),
			args: []string{"--kubeconfig", etc("controller-manager.kubeconfig"),
				"--authentication-kubeconfig", etc("controller-manager.kubeconfig"), "--authorization-kubeconfig", etc("controller-manager.kubeconfig"),
				"--service-account-private-key-file", pki("sa.key"), "--root-ca-file", pki("ca.crt"),
				"--cluster-signing-cert-file", pki("ca.crt"), "--cluster-signing-key-file", pki("ca.key"),
				"--use-service-account-credentials", "--leader-elect=false", "--bind-address", "127.0.0.1", "--profiling=false"},
			ports: []string{"127.0.0.1:10257"}, ready: httpReady(insecureTLS(), "https://127.0.0.1:10257/healthz"),
		},
		{
			name: "kube-scheduler", binary: b.k("kube-scheduler"),
			args: []string{"--kubeconfig", etc("scheduler.kubeconfig"),
				"--authentication-kubeconfig", etc("scheduler.kubeconfig"), "--authorization-kubeconfig", etc("scheduler.kubeconfig"),
				"--leader-elect=false", "--bind-address", "127.0.0.1", "--profiling=false"},
			ports: []string{"127.0.0.1:10259"}, ready: httpReady(insecureTLS(), "https://127.0.0.1:10259/healthz"),
		},
		{
			name: "containerd", binary: "/usr/bin/containerd",
			args:  []string{"--config", etc("containerd.toml")},
			ready: criReady(c.containerdSocket()),
		},
		{
			name: "kubelet", binary: b.k("kubelet"),
			args: []string{"--config", etc("kubelet.yaml"), "--kubeconfig", etc("kubelet.kubeconfig"),
				"--hostname-override", c.NodeName, "--node-ip", c.firstNode().nodeIPs(), "--root-dir", c.KubeletRoot()},
			ports: []string{"0.0.0.0:10250", "127.0.0.1:10248"}, ready: httpReady(nil, "http://127.0.0.1:10248/healthz"),
		},
		{
			name: "kube-proxy", binary: b.k("kube-proxy"),
			args:  []string{"--config", etc("kube-proxy.yaml")},
			ports: []string{"127.0.0.1:10256"}, ready: httpReady(nil, "http://127.0.0.1:10256/livez"),
		},
		{
			name: "virtlogd", binary: "/usr/sbin/virtlogd",
			ready: socketReady("/run/libvirt/virtlogd-sock"),
		},
		{
			name: "libvirtd", binary: "/usr/sbin/libvirtd",
			args:  []string{"-f", etc("libvirtd.conf")},
			ready: socketReady(c.LibvirtSocket()),
		},
	}
}

// nodeProcesses are the daemons of an extra node, in start order: the
// registry's forward into its loopback, then containerd, the kubelet and
// kube-proxy in its namespaces.
func (c *Cluster) nodeProcesses(b binaries, n node) []*process {
	ns := &namespaces{net: netnsPath(n), mnt: c.mountNSPath(n)}
	return []*process{
		{
			name: n.proc("registry-link"), binary: b.testbed(),
			args:  []string{"node-link", "--netns", ns.net, "--listen", RegistryAddr, "--to", RegistryAddr},
			ready: httpReadyIn(ns.net, "http://"+RegistryAddr+"/v2/"),
		},
		{
			name: n.proc("containerd"), binary: "/usr/bin/containerd", ns: ns,
			args:  []string{"--config", c.etc(n, "containerd.toml")},
			ready: criReady(c.containerdSocketOf(n)),
		},
		{
			name: n.proc("kubelet"), binary: b.k("kubelet"), ns: ns,
			args: []string{"--config", c.etc(n, "kubelet.yaml"), "--kubeconfig", c.etc(n, "kubelet.kubeconfig"),
				"--hostname-override", n.name, "--node-ip", n.nodeIPs(), "--root-dir", c.KubeletRoot()},
			ready: httpReadyIn(ns.net, "http://127.0.0.1:10248/healthz"),
		},
		{
			name: n.proc("kube-proxy"), binary: b.k("kube-proxy"), ns: ns,
			args:  []string{"--config", c.etc(n, "kube-proxy.yaml")},
			ready: httpReadyIn(ns.net, "http://127.0.0.1:10256/livez"),
		},
	}
}

// ContainerDiskMaxBytes is the testbed's cap on one containerDisk's files:
// well above its guests', low enough that a test can cross it quickly.
const ContainerDiskMaxBytes = 1 << 30

func insecureTLS() *tls.Config {
	// Component health endpoints serve self-signed certificates; only
	// liveness is read from them.
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // health probe of a local self-signed endpoint
}

func httpReady(tlsConfig *tls.Config, url string) func(context.Context) error {
	return getOK(&http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}, url)
}

// getOK is a readiness check: GET url with client answers 2xx.
func getOK(client *http.Client, url string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// apiReady polls /readyz with the admin identity.
func (c *Cluster) apiReady() func(context.Context) error {
	return func(ctx context.Context) error {
		cert, err := tls.LoadX509KeyPair(filepath.Join(c.pkiDir(), "admin.crt"), filepath.Join(c.pkiDir(), "admin.key"))
		if err != nil {
			return err
		}
		caPEM, err := os.ReadFile(filepath.Join(c.pkiDir(), "ca.crt"))
		if err != nil {
			return err
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool}
		return httpReady(cfg, fmt.Sprintf("https://127.0.0.1:%d/readyz", APIServerPort))(ctx)
	}
}

func socketReady(path string) func(context.Context) error {
	return func(ctx context.Context) error {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return err
		}
		return conn.Close()
	}
}

// apiServerArgs are the kube-apiserver's flags, with the front proxy's for
// aggregated APIs (the upload API).
func (c *Cluster) apiServerArgs() []string {
	pki := func(f string) string { return filepath.Join(c.pkiDir(), f) }
	return []string{"--etcd-servers", "http://" + etcdClientAddr,
		"--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(APIServerPort), "--advertise-address", c.NodeIP.String(),
		"--service-cluster-ip-range", serviceCIDR + "," + serviceCIDR6, "--allow-privileged=true",
		"--client-ca-file", pki("ca.crt"), "--tls-cert-file", pki("apiserver.crt"), "--tls-private-key-file", pki("apiserver.key"),
		"--kubelet-client-certificate", pki("apiserver-kubelet-client.crt"), "--kubelet-client-key", pki("apiserver-kubelet-client.key"),
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", pki("sa.pub"), "--service-account-signing-key-file", pki("sa.key"),
		"--authorization-mode", "Node,RBAC", "--enable-admission-plugins", "NodeRestriction", "--profiling=false",
		"--admission-control-config-file", c.path("etc", "admission.yaml"),
		"--requestheader-client-ca-file", pki("front-proxy-ca.crt"), "--requestheader-allowed-names", frontProxyClient,
		"--requestheader-username-headers", "X-Remote-User", "--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", pki("front-proxy-client.crt"), "--proxy-client-key-file", pki("front-proxy-client.key"),
		"--enable-aggregator-routing=true",
		// Extra nodes have names no resolver knows: logs and exec go to the
		// node address.
		"--kubelet-preferred-address-types", "InternalIP,Hostname",
		// The watch cache waits for etcd's progress notifications to serve
		// a watch or list at the current revision, and etcd 3.4.23 (the
		// distribution's) does not deliver them: a watch without a
		// resourceVersion on a kind that had not changed lately failed
		// with "Too large resource version" (tkn lost the logs of tasks so).
		// One node needs no cache; every request reads etcd.
		"--watch-cache=false"}
}
