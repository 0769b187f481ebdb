package hyperconverged

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/tekvirt/tekvirt/catalog"
	"github.com/tekvirt/tekvirt/contracts/trust"
	ctrlconfig "github.com/tekvirt/tekvirt/controllers/config"
)

// Labels on every object the operator deploys; its watches select them.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedBy      = "tekvirt-operator"
)

// ContainerDiskMaxBytesAnnotation on the HyperConverged sets the handlers'
// --container-disk-max-bytes (as HCO takes settings it has no field for
// from annotations).
const ContainerDiskMaxBytesAnnotation = "tekvirt.io/container-disk-max-bytes"

// Programs name the images the operator deploys as manifests name them
// (ko://NAME): tekvirt's programs by import path, and the hosted control
// plane's release image and worker disk, which it publishes for `tekvirt
// create cluster` and the NodePool controller.
// Each is a flag of tekvirt-operator (--<base name>-image) and a key of
// Images.
var Programs = []string{
	"github.com/tekvirt/tekvirt/cmd/tekvirt-controller",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-step",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-launcher",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-handler",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-hostpath",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-downloads",
	"github.com/tekvirt/tekvirt/cmd/tekvirt-router",
	HostedReleaseImage,
	HostedWorkerImage,
	HostedCoreDNSImage,
	HostedKonnectivityAgentImage,
	NetworkAddonsImage,
	CSISidecarsImage,
}

// NetworkAddonsImage holds the network add-ons' programs: Multus's thin
// plugin and its installer, and the bridge CNI plugin.
const NetworkAddonsImage = "tekvirt.io/network-addons"

// CSISidecarsImage holds Kubernetes' CSI sidecars the hostpath storage
// runs: /csi-provisioner, /csi-snapshotter and /snapshot-controller.
const CSISidecarsImage = "tekvirt.io/csi-sidecars"

// HostedReleaseImage is the hosted control plane's release image's name,
// HostedWorkerImage the containerDisk NodePool workers boot by default,
// HostedCoreDNSImage the hosted clusters' DNS (CoreDNS),
// HostedKonnectivityAgentImage their workers' Konnectivity agent
// (/usr/bin/proxy-agent; the proxy server is in the release image).
const (
	HostedReleaseImage           = "tekvirt.io/hosted-release"
	HostedWorkerImage            = "tekvirt.io/hosted-worker"
	HostedCoreDNSImage           = "tekvirt.io/hosted-coredns"
	HostedKonnectivityAgentImage = "tekvirt.io/hosted-konnectivity-agent"
)

// Images maps each tekvirt program's import path, as the manifests name
// it (ko://<import path>), to the image reference the operator deploys.
type Images map[string]string

// Version is a digest of the images, which the HyperConverged reports as
// version "tekvirt" once every component runs them.
func (im Images) Version() string {
	keys := slices.Sorted(maps.Keys(im))
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%s=%s\n", k, im[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// caSecretName holds the operator's CA (tls.crt, tls.key) and the CA it
// replaced (previous.crt), in ctrlconfig.Namespace.
const caSecretName = "tekvirt-ca"

// webhookDNSNames are the Services the controller's certificate serves:
// the webhooks, the upload API and the upload proxy.
func webhookDNSNames() []string {
	var out []string
	for _, svc := range []string{ctrlconfig.WebhookService, ctrlconfig.APIService, ctrlconfig.UploadProxyService} {
		out = append(out, svc, svc+"."+ctrlconfig.Namespace, svc+"."+ctrlconfig.Namespace+".svc", svc+"."+ctrlconfig.Namespace+".svc.cluster.local")
	}
	return out
}

// downloadsDNSNames are the names of the downloads Service.
func downloadsDNSNames() []string {
	svc, ns := ctrlconfig.DownloadsService, ctrlconfig.Namespace
	return []string{svc + "." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc.cluster.local"}
}

// certs are what the components are deployed with.
type certs struct {
	caBundle                    []byte
	webhook, handler, downloads keyPair
}

// renderFiles decodes the manifests files of ctrlconfig.FS, their images
// resolved.
func renderFiles(images Images, files []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := fs.ReadFile(ctrlconfig.FS, f)
		if err != nil {
			return nil, err
		}
		resolved, err := catalog.ResolveImages(string(data), images)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		docs, err := ctrlconfig.Decode([]byte(resolved))
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		out = append(out, docs...)
	}
	return out, nil
}

// render returns the component objects: the controller's Deployment,
// Services, webhooks and APIService (caBundle set), the node daemons, the
// default StorageClass, the common cluster instancetypes and preferences,
// the serving certificates' Secrets and the CA bundle's ConfigMap, each
// labelled as the operator's.
func render(images Images, c certs, containerDiskMaxBytes string, addons ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, f := range append(slices.Clone(ctrlconfig.ComponentFiles), addons...) {
		docs, err := renderFiles(images, []string{f})
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if err := setCABundle(d, c.caBundle); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if d.GetKind() == "DaemonSet" && d.GetName() == ctrlconfig.HandlerDaemonSet && containerDiskMaxBytes != "" {
				if err := setArg(d, "--container-disk-max-bytes", containerDiskMaxBytes); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, docs...)
	}
	common, err := catalog.CommonInstancetypes()
	if err != nil {
		return nil, err
	}
	docs, err := ctrlconfig.Decode(common)
	if err != nil {
		return nil, fmt.Errorf("decoding the common instancetypes: %w", err)
	}
	out = append(out, docs...)
	out = append(out,
		tlsSecret(ctrlconfig.WebhookSecret, ctrlconfig.Namespace, c.webhook),
		handlerSecret(c.handler, c.caBundle),
		tlsSecret(ctrlconfig.DownloadsSecret, ctrlconfig.Namespace, c.downloads),
		&unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": trust.CABundleConfigMap, "namespace": trust.Namespace},
			"data":     map[string]any{trust.CABundleKey: string(c.caBundle)},
		}})
	for _, o := range out {
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[ManagedByLabel] = ManagedBy
		labels["app.kubernetes.io/part-of"] = "tekvirt"
		o.SetLabels(labels)
	}
	return out, nil
}

func tlsSecret(name, ns string, kp keyPair) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"data": map[string]any{
			"tls.crt": encode(kp.CertPEM),
			"tls.key": encode(kp.KeyPEM),
		},
	}}
}

// handlerSecret holds the handlers' certificate with the CA bundle they
// verify each other by when one carries a live migration to another.
func handlerSecret(kp keyPair, caBundle []byte) *unstructured.Unstructured {
	s := tlsSecret(ctrlconfig.HandlerCertSecret, ctrlconfig.NodeNamespace, kp)
	s.Object["data"].(map[string]any)["ca.crt"] = encode(caBundle)
	return s
}

func encode(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// setCABundle makes the API server trust bundle when it calls the
// webhooks or the APIService in o.
func setCABundle(o *unstructured.Unstructured, bundle []byte) error {
	enc := encode(bundle)
	switch o.GetKind() {
	case "APIService":
		return unstructured.SetNestedField(o.Object, enc, "spec", "caBundle")
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			if err := unstructured.SetNestedField(h.(map[string]any), enc, "clientConfig", "caBundle"); err != nil {
				return err
			}
		}
		return unstructured.SetNestedSlice(o.Object, hooks, "webhooks")
	}
	return nil
}

// setArg replaces the value of flag (written --flag=value) in the first
// container of a workload's Pod template.
func setArg(workload *unstructured.Unstructured, flag, value string) error {
	containers, _, _ := unstructured.NestedSlice(workload.Object, "spec", "template", "spec", "containers")
	if len(containers) == 0 {
		return fmt.Errorf("%s %s has no containers", workload.GetKind(), workload.GetName())
	}
	c := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(c, "args")
	found := false
	for i, a := range args {
		if strings.HasPrefix(a, flag+"=") {
			args[i], found = flag+"="+value, true
		}
	}
	if !found {
		return fmt.Errorf("%s %s has no %s argument", workload.GetKind(), workload.GetName(), flag)
	}
	if err := unstructured.SetNestedStringSlice(c, args, "args"); err != nil {
		return err
	}
	return unstructured.SetNestedSlice(workload.Object, containers, "spec", "template", "spec", "containers")
}
