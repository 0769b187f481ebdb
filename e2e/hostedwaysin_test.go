package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/hostedservices"
	"github.com/tekvirt/tekvirt/e2e/docexample"
	"github.com/tekvirt/tekvirt/e2e/framework"
)

// checkWaysIn: the ways into hosted cluster name (control plane in cpNS)
// from the infrastructure, as HyperShift's KubeVirt platform publishes
// them. A hosted LoadBalancer Service in front of the app=web Pod (which
// answers want on 8080, Service default/web port 80) gets an address,
// reached from the testbed host and from a Pod of the infrastructure
// (namespace ns); and the hosted cluster's default ingress - its own
// router, serving an Ingress of web.apps.<name>.<DefaultBaseDomain> -
// is reached through the infrastructure Service
// default-ingress-passthrough-service-*: HTTPS on 443 with the router's
// default certificate, HTTP on 80; an Ingress's certificate Secret is
// taken from its own namespace only (checkIngressSecretsApart). It
// returns the load balancer's address.
func checkWaysIn(t *testing.T, f *framework.Framework, hosted kubernetes.Interface, ns, name, cpNS, want string) string {
	ctx := context.Background()
	created := time.Now()
	lb, err := hosted.CoreV1().Services("default").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 8081, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var lbIP string
	framework.Eventually(t, 2*time.Minute, "hosted Service default/web-lb's load-balancer address", func() error {
		s, err := hosted.CoreV1().Services("default").Get(ctx, lb.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("none yet")
		}
		lbIP = s.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	lbAddr := net.JoinHostPort(lbIP, "8081")
	framework.Eventually(t, 2*time.Minute, "hosted default/web-lb at "+lbAddr+" from the testbed host", func() error {
		return httpWants("http://"+lbAddr+"/", want)
	})
	t.Logf("hosted LoadBalancer Service created -> reachable from the infrastructure: %s", time.Since(created).Round(100*time.Millisecond))

	// The default ingress: the hosted router up, then the docs' commands
	// (an Ingress of web.apps.<name>.internal, curl over HTTPS through the
	// passthrough Service with the router's default certificate).
	domain := hc.IngressDomain(name, "")
	host := "web." + domain
	framework.Eventually(t, 5*time.Minute, "the hosted router available", func() error {
		d, err := hosted.AppsV1().Deployments(hc.RouterNamespace).Get(ctx, hc.RouterDeployment, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas < 1 {
			return fmt.Errorf("available %d of %d", d.Status.AvailableReplicas, d.Status.Replicas)
		}
		return nil
	})
	dir := t.TempDir()
	kc, err := f.Kube.CoreV1().Secrets(ns).Get(ctx, hc.AdminKubeconfigSecret(name), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".kubeconfig"), kc.Data[hc.KubeconfigKey], 0o600); err != nil {
		t.Fatal(err)
	}
	mustRunExample(t, f, docexample.Find(t, "hosted-ingress"), dir, []string{"CLUSTER_NAME=" + name, "CLUSTER_NAMESPACE=" + ns}, want)
	var passIP string
	framework.Eventually(t, time.Minute, "the default-ingress passthrough Service in "+cpNS, func() error {
		list, err := f.Kube.CoreV1().Services(cpNS).List(ctx, metav1.ListOptions{LabelSelector: hc.ComponentLabel + "=" + hostedservices.IngressPassthroughComponent + "," + hostedservices.ClusterNameLabel + "=" + name})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 || !strings.HasPrefix(list.Items[0].Name, hostedservices.PassthroughServicePrefix) {
			return fmt.Errorf("%d Services", len(list.Items))
		}
		passIP = list.Items[0].Spec.ClusterIP
		return nil
	})
	if err := wants(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, "http://"+net.JoinHostPort(passIP, "80")+"/", host, want); err != nil {
		t.Errorf("http://%s through %s:80: %v", host, passIP, err)
	}
	framework.Eventually(t, 30*time.Second, "the hosted Ingress default/web's address", func() error {
		ing, err := hosted.NetworkingV1().Ingresses("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if lbs := ing.Status.LoadBalancer.Ingress; len(lbs) != 1 || lbs[0].Hostname != "router-default."+domain {
			return fmt.Errorf("status %+v, want router-default.%s", lbs, domain)
		}
		return nil
	})
	checkIngressSecretsApart(t, hosted, passIP, domain)

	// From a Pod of the infrastructure cluster.
	script := fmt.Sprintf(`get() { for i in $(seq 30); do b=$(printf 'GET / HTTP/1.0\r\nHost: %%s\r\n\r\n' "$4" | nc -w 2 "$2" "$3" | tail -n 1) && [ -n "$b" ] && { echo "$1 $b"; return; }; sleep 1; done; echo "$1 unreachable"; }
get lb %s 8081 web
get ingress %s 80 %s
`, lbIP, passIP, host)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ways-in", Namespace: ns},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{
			Name: "c", Image: registryImage(t, f, "tekvirt/busybox"), Command: []string{"sh", "-c", script}}}},
	}
	if _, err := f.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.WaitPodSucceeded(t, ns, pod.Name, 2*time.Minute)
	b, err := f.Kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"lb " + want, "ingress " + want} {
		if !strings.Contains(string(b), line) {
			t.Errorf("from a Pod of the infrastructure: want %q\n%s", line, b)
		}
	}
	return lbAddr
}

// httpWants GETs url and wants body in the answer.
func httpWants(url, body string) error {
	// A fresh connection each call: see TestHostedPodThroughput.
	return wants(&http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}, url, "", body)
}

// wants GETs url with c, naming host ("": url's), and wants body in the
// answer.
func wants(c *http.Client, url, host, body string) error {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if !strings.Contains(string(b), body) {
		return fmt.Errorf("%s: %q, want %q", resp.Status, b, body)
	}
	return nil
}
