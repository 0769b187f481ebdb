package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

	"github.com/tekvirt/tekvirt/contracts/trust"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// saToken makes ServiceAccount name in ns and returns a token of it.
func saToken(t *testing.T, f *framework.Framework, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := f.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := f.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// scrapeMetrics GETs url with token (none if empty) and returns the status
// code and body.
func scrapeMetrics(t *testing.T, url string, tlsConfig *tls.Config, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// metricsReader is a token of a ServiceAccount in ns bound to
// tekvirt-metrics-reader, as a monitoring system's would be.
func metricsReader(t *testing.T, f *framework.Framework, ns string) string {
	t.Helper()
	reader := saToken(t, f, ns, "scraper")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tekvirt-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}}}
	if _, err := f.Kube.RbacV1().ClusterRoleBindings().Create(context.Background(), binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	return reader
}

// scrapeHandler GETs node's handler /metrics with token, verifying its
// certificate as tekvirt's CA's for the node's name, and returns the
// status code and body.
func scrapeHandler(t *testing.T, f *framework.Framework, node, token string) (int, string) {
	t.Helper()
	ca, err := f.Kube.CoreV1().ConfigMaps(ctrlconfig.Namespace).Get(context.Background(), trust.CABundleConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca.Data[trust.CABundleKey])) {
		t.Fatal("no certificate in the CA bundle")
	}
	url := "https://" + net.JoinHostPort(f.HandlerPod(t, node).Status.HostIP, "8443") + "/metrics"
	return scrapeMetrics(t, url, &tls.Config{RootCAs: pool, ServerName: node, MinVersion: tls.VersionTLS12}, token)
}

// scrapeController GETs the controller's /metrics with token and returns
// the status code and body. Its serving certificate is its own,
// self-signed: only the answer is checked, not who serves it.
func scrapeController(t *testing.T, f *framework.Framework, token string) (int, string) {
	t.Helper()
	pods, err := f.Kube.CoreV1().Pods(ctrlconfig.Namespace).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tekvirt-controller"})
	if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("controller Pod: %v %v", pods, err)
	}
	url := "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "8082") + "/metrics"
	return scrapeMetrics(t, url, &tls.Config{InsecureSkipVerify: true}, token) //nolint:gosec // see above
}

// TestControllerMetricsScrape scrapes the controller's /metrics as a
// monitoring system bound to tekvirt-metrics-reader would: a running VMI
// shows in kubevirt_vmi_phase_count on its node; a caller without a token,
// or without the role, reads nothing.
func TestControllerMetricsScrape(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	scrape := func(token string) (int, string) { return scrapeController(t, f, token) }
	reader := metricsReader(t, f, ns)
	if code, _ := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("scrape without a token: %d, want 401", code)
	}
	if code, _ := scrape(saToken(t, f, ns, "nosy")); code != http.StatusForbidden {
		t.Errorf("scrape by a ServiceAccount without the role: %d, want 403", code)
	}

	vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "counted"}, Spec: framework.GuestVMI(framework.GuestImage, "counted")}
	if err := c.Create(ctx, vmi); err != nil {
		t.Fatal(err)
	}
	running := framework.WaitVMI(t, c, ns, vmi.Name, 2*time.Minute, "running", framework.AgentConnected)
	line := regexp.MustCompile(`(?m)^kubevirt_vmi_phase_count\{node="` + regexp.QuoteMeta(running.Status.NodeName) + `",phase="running"\} (\d+)$`)
	framework.Eventually(t, 30*time.Second, "the running VMI counted", func() error {
		code, body := scrape(reader)
		if code != http.StatusOK {
			return fmt.Errorf("scrape: %d %.200s", code, body)
		}
		m := line.FindStringSubmatch(body)
		if m == nil {
			return fmt.Errorf("no kubevirt_vmi_phase_count for node %s running", running.Status.NodeName)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 {
			return fmt.Errorf("kubevirt_vmi_phase_count = %s", m[1])
		}
		return nil
	})
}

// TestHandlerMetricsScrape scrapes each node's handler /metrics (KubeVirt's
// port 8443, its certificate from tekvirt's CA for the node's name) with
// one VM on each node: each handler reports the memory and CPU of the VMs
// on its own node under KubeVirt's names, and no other node's; callers
// without a token or the role read nothing.
func TestHandlerMetricsScrape(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	nodes := f.Nodes(t)
	if len(nodes) > 2 {
		nodes = nodes[:2]
	}
	for i, node := range nodes {
		vmi := &v1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("measured-%d", i)},
			Spec: framework.GuestVMI(framework.GuestImage, fmt.Sprintf("measured-%d", i))}
		vmi.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		if err := c.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	reader := metricsReader(t, f, ns)
	for i, node := range nodes {
		name := fmt.Sprintf("measured-%d", i)
		framework.WaitVMI(t, c, ns, name, 3*time.Minute, "running", framework.AgentConnected)
		if code, _ := scrapeHandler(t, f, node, ""); code != http.StatusUnauthorized {
			t.Errorf("%s: scrape without a token: %d, want 401", node, code)
		}
		if code, _ := scrapeHandler(t, f, node, saToken(t, f, ns, fmt.Sprintf("nosy-%d", i))); code != http.StatusForbidden {
			t.Errorf("%s: scrape by a ServiceAccount without the role: %d, want 403", node, code)
		}
		labels := fmt.Sprintf(`name="%s",namespace="%s",node="%s"`, name, ns, node)
		framework.Eventually(t, 30*time.Second, node+"'s handler reports its VM", func() error {
			code, body := scrapeHandler(t, f, node, reader)
			if code != http.StatusOK {
				return fmt.Errorf("scrape: %d %.200s", code, body)
			}
			for metric, atLeast := range map[string]float64{
				"kubevirt_vmi_memory_domain_bytes{" + labels + "}":                       256 << 20,
				"kubevirt_vmi_memory_resident_bytes{" + labels + "}":                     64 << 20,
				"kubevirt_vmi_cpu_usage_seconds_total{" + labels + "}":                   0.1,
				`kubevirt_vmi_vcpu_seconds_total{id="0",` + labels + `,state="running"}`: 0.01,
			} {
				m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(metric) + ` (\S+)$`).FindStringSubmatch(body)
				if m == nil {
					return fmt.Errorf("no %s in:\n%s", metric, vmiSeries(body))
				}
				if v, err := strconv.ParseFloat(m[1], 64); err != nil || v < atLeast {
					return fmt.Errorf("%s = %s, want at least %g", metric, m[1], atLeast)
				}
			}
			for j := range nodes {
				if other := fmt.Sprintf(`name="measured-%d"`, j); j != i && strings.Contains(body, other) {
					return fmt.Errorf("%s's handler reports the VM on %s", node, nodes[j])
				}
			}
			return nil
		})
	}
}

// vmiSeries are the kubevirt_vmi_ lines of a scrape, for a failure message.
func vmiSeries(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "kubevirt_vmi_") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
