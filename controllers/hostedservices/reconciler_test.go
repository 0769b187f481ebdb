package hostedservices

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	"github.com/openshift/hypershift/api/util/ipnet"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	hc "github.com/tekvirt/tekvirt/contracts/hostedcluster"
	"github.com/tekvirt/tekvirt/controllers/nodepool"
	"github.com/tekvirt/tekvirt/controllers/testenv"
)

// TestPublishHostedServices runs the reconciler against two real API
// servers, one the infrastructure's and one the hosted cluster's: a hosted
// LoadBalancer Service gets an infrastructure Service and EndpointSlice
// of the workers (their VMIs' addresses, whatever the hosted Nodes say)
// and its address in its status; a hosted Node becoming Ready is seen
// through the hosted watch; the router's node ports reach the default
// ingress passthrough; a hosted Service deleted takes its infrastructure
// Service with it.
func TestPublishHostedServices(t *testing.T) {
	crds := filepath.Join("..", "config", "crd")
	infraCfg := testenv.Start(t, filepath.Join(crds, "hypershift.openshift.io_hostedclusters.yaml"),
		filepath.Join(crds, "hypershift.openshift.io_nodepools.yaml"), filepath.Join(crds, "kubevirt.io_virtualmachineinstances.yaml"))
	hostedCfg := testenv.Start(t)
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, hyperv1.AddToScheme, kubevirtv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	infra := testenv.Client(t, infraCfg, clientgoscheme.AddToScheme, hyperv1.AddToScheme, kubevirtv1.AddToScheme)
	hosted := kubernetes.NewForConfigOrDie(hostedCfg)

	cl := provisioned(t, infra, hostedCfg)
	cpNS := hc.ControlPlaneNamespace(cl.Namespace, cl.Name)
	for i, name := range []string{"w1", "w2"} {
		workerVMI(t, infra, cpNS, name, fmt.Sprintf("10.244.%d.7", i+1))
		hostedNode(t, hosted, name, name == "w1", "10.96.0.1") // a hosted admin's lie about its address
	}
	web := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}}}
	web, err := hosted.CoreV1().Services("default").Create(ctx, web, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	testenv.StartManager(t, infraCfg, scheme, (&Reconciler{}).setup)

	lbName := LoadBalancerName(web)
	var slice *discoveryv1.EndpointSlice
	testenv.Eventually(t, "the infrastructure Service and EndpointSlice of hosted default/web", func() error {
		svc := &corev1.Service{}
		if err := infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lbName}, svc); err != nil {
			return err
		}
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.IntVal != web.Spec.Ports[0].NodePort {
			return fmt.Errorf("spec %+v, want port 80 to node port %d", svc.Spec, web.Spec.Ports[0].NodePort)
		}
		slice = &discoveryv1.EndpointSlice{}
		return infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lbName + "-ipv4"}, slice)
	})
	ready := map[string]bool{}
	for _, ep := range slice.Endpoints {
		ready[ep.Addresses[0]] = *ep.Conditions.Ready
	}
	if len(ready) != 2 || !ready["10.244.1.7"] || ready["10.244.2.7"] {
		t.Errorf("endpoints %v, want 10.244.1.7 ready and 10.244.2.7 not (its hosted node is not Ready), never a hosted Node's address", ready)
	}
	testenv.Eventually(t, "hosted default/web's load-balancer address", func() error {
		svc := &corev1.Service{}
		if err := infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lbName}, svc); err != nil {
			return err
		}
		got, err := hosted.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if in := got.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != svc.Spec.ClusterIP {
			return fmt.Errorf("ingress %+v, want the infrastructure Service's address %s", in, svc.Spec.ClusterIP)
		}
		return nil
	})
	testenv.Eventually(t, "an EnsuredLoadBalancer event on hosted default/web", func() error {
		evs, err := hosted.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=" + EnsuredReason})
		if err != nil || len(evs.Items) == 0 {
			return fmt.Errorf("none (%w)", err)
		}
		return nil
	})

	// w2's hosted node turns Ready: seen through the hosted watch.
	hostedNode(t, hosted, "w2", true, "")
	testenv.Eventually(t, "w2 ready in the EndpointSlice", func() error {
		s := &discoveryv1.EndpointSlice{}
		if err := infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lbName + "-ipv4"}, s); err != nil {
			return err
		}
		for _, ep := range s.Endpoints {
			if !*ep.Conditions.Ready {
				return fmt.Errorf("%s not ready", ep.Addresses[0])
			}
		}
		return nil
	})

	// The default ingress: the router's node ports, once it exists.
	pass := PassthroughName(cl)
	if _, err := hosted.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hc.RouterNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	router, err := hosted.CoreV1().Services(hc.RouterNamespace).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: hc.RouterService}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "router"},
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}, {Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the passthrough to the router's node ports", func() error {
		s := &discoveryv1.EndpointSlice{}
		if err := infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: pass + "-ipv4"}, s); err != nil {
			return err
		}
		if len(s.Ports) != 2 || *s.Ports[0].Port != router.Spec.Ports[1].NodePort || *s.Ports[1].Port != router.Spec.Ports[0].NodePort || len(s.Endpoints) != 2 {
			return fmt.Errorf("ports %+v endpoints %+v", s.Ports, s.Endpoints)
		}
		return nil
	})

	// The hosted Service goes: so does its infrastructure Service.
	if err := hosted.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the infrastructure Service of deleted default/web gone", func() error {
		err := infra.Get(ctx, client.ObjectKey{Namespace: cpNS, Name: lbName}, &corev1.Service{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%w)", err)
	})
}

// setup registers r with mgr, reading through the API as in production.
func (r *Reconciler) setup(mgr ctrl.Manager) error {
	r.Client, r.Reader = mgr.GetClient(), mgr.GetAPIReader()
	return r.SetupWithManager(mgr)
}

// provisioned makes a HostedCluster, its NodePool and its control-plane
// namespace with the admin kubeconfig of the API server at hostedCfg.
func provisioned(t *testing.T, c client.Client, hostedCfg *rest.Config) *hyperv1.HostedCluster {
	t.Helper()
	ctx := context.Background()
	cl := &hyperv1.HostedCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "demo"},
		Spec: hyperv1.HostedClusterSpec{
			Release:    hyperv1.Release{Image: "registry.example/release:1"},
			PullSecret: corev1.LocalObjectReference{Name: "demo-pull-secret"},
			Platform:   hyperv1.PlatformSpec{Type: hyperv1.KubevirtPlatform, Kubevirt: &hyperv1.KubevirtPlatformSpec{GenerateID: "x7k2m9p4qz"}},
			Etcd: hyperv1.EtcdSpec{ManagementType: hyperv1.Managed, Managed: &hyperv1.ManagedEtcdSpec{
				Storage: hyperv1.ManagedEtcdStorageSpec{Type: hyperv1.PersistentVolumeEtcdStorage}}},
			Networking: hyperv1.ClusterNetworking{
				ClusterNetwork: []hyperv1.ClusterNetworkEntry{{CIDR: *ipnet.MustParseCIDR("10.132.0.0/14")}},
				ServiceNetwork: []hyperv1.ServiceNetworkEntry{{CIDR: *ipnet.MustParseCIDR("172.31.0.0/16")}},
			},
			Services: []hyperv1.ServicePublishingStrategyMapping{
				{Service: hyperv1.APIServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.LoadBalancer}},
				{Service: hyperv1.OAuthServer, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
				{Service: hyperv1.Konnectivity, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
				{Service: hyperv1.Ignition, ServicePublishingStrategy: hyperv1.ServicePublishingStrategy{Type: hyperv1.Route}},
			},
		},
	}
	mem, size := resource.MustParse("1Gi"), resource.MustParse("4Gi")
	pool := &hyperv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "demo-workers"},
		Spec: hyperv1.NodePoolSpec{
			ClusterName: "demo", Replicas: ptr.To(int32(2)),
			Management: hyperv1.NodePoolManagement{UpgradeType: hyperv1.UpgradeTypeReplace},
			Release:    hyperv1.Release{Image: "registry.example/release:1"},
			Platform: hyperv1.NodePoolPlatform{Type: hyperv1.KubevirtPlatform, Kubevirt: &hyperv1.KubevirtNodePoolPlatform{
				Compute:    &hyperv1.KubevirtCompute{Cores: ptr.To(uint32(1)), Memory: &mem},
				RootVolume: &hyperv1.KubevirtRootVolume{KubevirtVolume: hyperv1.KubevirtVolume{Type: hyperv1.KubevirtVolumeTypePersistent, Persistent: &hyperv1.KubevirtPersistentVolume{Size: &size}}},
			}},
		},
	}
	cpNS := hc.ControlPlaneNamespace(cl.Namespace, cl.Name)
	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cpNS, Annotations: map[string]string{hc.ClusterAnnotation: "clusters/demo"}}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cpNS, Name: hc.LocalKubeconfigSecret}, Data: map[string][]byte{hc.KubeconfigKey: kubeconfigOf(t, hostedCfg)}},
		cl, pool,
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	return cl
}

func kubeconfigOf(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hosted"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["admin"] = &clientcmdapi.Context{Cluster: "hosted", AuthInfo: "admin"}
	kc.CurrentContext = "admin"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// workerVMI is a running worker of pool demo-workers at addr.
func workerVMI(t *testing.T, c client.Client, ns, name, addr string) {
	t.Helper()
	vmi := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{nodepool.PoolLabel: "demo-workers", nodepool.PoolNamespaceLabel: "clusters"}}}
	vmi.Spec.Networks = []kubevirtv1.Network{{Name: "default", NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}}}}
	if err := c.Create(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	vmi.Status.Phase, vmi.Status.NodeName = kubevirtv1.Running, "infra-1"
	vmi.Status.Interfaces = []kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", IP: addr, IPs: []string{addr}}}
	if err := c.Status().Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
}

// hostedNode makes (or updates) hosted Node name, Ready or not, claiming addr.
func hostedNode(t *testing.T, hosted kubernetes.Interface, name string, ready bool, addr string) {
	t.Helper()
	ctx := context.Background()
	n, err := hosted.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		n, err = hosted.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status}}
	if addr != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}
	}
	if _, err := hosted.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
