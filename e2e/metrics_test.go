package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "kubevirt.io/api/core/v1"

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

// TestControllerMetricsScrape scrapes the controller's /metrics as a
// monitoring system bound to tekvirt-metrics-reader would: a running VMI
// shows in kubevirt_vmi_phase_count on its node; a caller without a token,
// or without the role, reads nothing.
func TestControllerMetricsScrape(t *testing.T) {
	f := framework.New(t)
	ns := f.Namespace(t)
	c := f.VMClient(t)
	ctx := context.Background()
	pods, err := f.Kube.CoreV1().Pods(ctrlconfig.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tekvirt-controller"})
	if err != nil || len(pods.Items) == 0 || pods.Items[0].Status.PodIP == "" {
		t.Fatalf("controller Pod: %v %v", pods, err)
	}
	url := "https://" + net.JoinHostPort(pods.Items[0].Status.PodIP, "8082") + "/metrics"
	scrape := func(token string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		// The serving certificate is the controller's own, self-signed:
		// only the answer is checked here, not who serves it.
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see above
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	reader := saToken(t, f, ns, "scraper")
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-" + ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "tekvirt-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}}}
	if _, err := f.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
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
