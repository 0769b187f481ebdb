// Command crdgen writes CustomResourceDefinitions with structural schemas
// for upstream API kinds whose Go types carry no kubebuilder root markers,
// using controller-tools' schema parser on the upstream packages.
//
//	crdgen -out DIR
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-tools/pkg/crd"
	crdmarkers "sigs.k8s.io/controller-tools/pkg/crd/markers"
	"sigs.k8s.io/controller-tools/pkg/loader"
	"sigs.k8s.io/controller-tools/pkg/markers"
	"sigs.k8s.io/yaml"

	// The packages the CRDs come from, imported so that this module pins
	// their version and the loader finds them.
	_ "kubevirt.io/api/core/v1"
	_ "kubevirt.io/api/instancetype/v1beta1"
	_ "kubevirt.io/api/migrations/v1alpha1"
	_ "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"

	_ "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	_ "github.com/openshift/api/template/v1"
	_ "github.com/openshift/hypershift/api/hypershift/v1beta1"
)

const (
	instancetypePkg = "kubevirt.io/api/instancetype/v1beta1"
	cdiPkg          = "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	hypershiftPkg   = "github.com/openshift/hypershift/api/hypershift/v1beta1"
	migrationsPkg   = "kubevirt.io/api/migrations/v1alpha1"
	nadPkg          = "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
)

var ageColumn = []apiextensionsv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}

// kind is one generated CRD and what its Go types do not say.
type kind struct {
	pkg        string
	gk         schema.GroupKind
	shortNames []string
	status     bool
	// cluster scoped (the upstream types say so only to client-gen).
	cluster bool
	columns []apiextensionsv1.CustomResourceColumnDefinition
	// ownMarkers: the types carry their own resource, subresource and
	// column markers (HyperShift's), which are kept as they are.
	ownMarkers bool
	// plural and singular replace the names derived from the kind when
	// the upstream CRD spells them otherwise (client-gen's resourceName).
	plural, singular string
	// optional lists fields the upstream CRD does not require although
	// their JSON tags lack omitempty, as "spec" and "spec.config".
	optional []string
}

var kinds = []kind{
	{
		pkg: "kubevirt.io/api/core/v1", gk: schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachine"},
		shortNames: []string{"vm", "vms"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Status", Type: "string", JSONPath: ".status.printableStatus"},
			{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
		},
	},
	{
		pkg: "kubevirt.io/api/core/v1", gk: schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachineInstance"},
		// Status is the controller's and the node handler's to write: with the
		// subresource, a status sent with a create or an update is dropped.
		shortNames: []string{"vmi", "vmis"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "IP", Type: "string", JSONPath: ".status.interfaces[0].ipAddress"},
			{Name: "NodeName", Type: "string", JSONPath: ".status.nodeName"},
			{Name: "Ready", Type: "string", JSONPath: `.status.conditions[?(@.type=="Ready")].status`},
			{Name: "Live-Migratable", Type: "string", JSONPath: `.status.conditions[?(@.type=="LiveMigratable")].status`, Priority: 1},
			{Name: "Paused", Type: "string", JSONPath: `.status.conditions[?(@.type=="Paused")].status`, Priority: 1},
		},
	},
	{
		pkg: "kubevirt.io/api/core/v1", gk: schema.GroupKind{Group: "kubevirt.io", Kind: "VirtualMachineInstanceMigration"},
		shortNames: []string{"vmim", "vmims"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "VMI", Type: "string", JSONPath: ".spec.vmiName"},
		},
	},
	{pkg: migrationsPkg, gk: schema.GroupKind{Group: "migrations.kubevirt.io", Kind: "MigrationPolicy"}, cluster: true, status: true},
	{
		pkg: cdiPkg, gk: schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "DataVolume"},
		shortNames: []string{"dv", "dvs"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Phase", Type: "string", JSONPath: ".status.phase"},
			{Name: "Progress", Type: "string", JSONPath: ".status.progress"},
			{Name: "Restarts", Type: "integer", JSONPath: ".status.restartCount"},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		pkg: cdiPkg, gk: schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "DataSource"},
		shortNames: []string{"das"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		pkg: cdiPkg, gk: schema.GroupKind{Group: "cdi.kubevirt.io", Kind: "DataImportCron"},
		shortNames: []string{"dic", "dics"}, status: true,
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{
		// Multus's: a NetworkAttachmentDefinition may leave its CNI
		// configuration to a file on the nodes, so none of it is required.
		pkg: nadPkg, gk: schema.GroupKind{Group: "k8s.cni.cncf.io", Kind: "NetworkAttachmentDefinition"},
		shortNames: []string{"net-attach-def"}, plural: "network-attachment-definitions", singular: "network-attachment-definition",
		optional: []string{"spec", "spec.config"},
	},
	{pkg: instancetypePkg, gk: schema.GroupKind{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineInstancetype"}, shortNames: []string{"vminstancetype", "vminstancetypes", "vmf", "vmfs"}, columns: ageColumn},
	{pkg: instancetypePkg, gk: schema.GroupKind{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterInstancetype"}, cluster: true, shortNames: []string{"vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"}, columns: ageColumn},
	{pkg: instancetypePkg, gk: schema.GroupKind{Group: "instancetype.kubevirt.io", Kind: "VirtualMachinePreference"}, shortNames: []string{"vmpref", "vmprefs", "vmp", "vmps"}, columns: ageColumn},
	{pkg: instancetypePkg, gk: schema.GroupKind{Group: "instancetype.kubevirt.io", Kind: "VirtualMachineClusterPreference"}, cluster: true, shortNames: []string{"vmclusterpref", "vmclusterprefs", "vmcp", "vmcps"}, columns: ageColumn},
	{
		// Installed by the operator only where the API is not served
		// (OpenShift serves it itself).
		pkg: "github.com/openshift/api/template/v1", gk: schema.GroupKind{Group: "template.openshift.io", Kind: "Template"},
		columns: []apiextensionsv1.CustomResourceColumnDefinition{
			{Name: "Description", Type: "string", JSONPath: `.metadata.annotations.description`},
			{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"},
		},
	},
	{pkg: hypershiftPkg, gk: schema.GroupKind{Group: "hypershift.openshift.io", Kind: "HostedCluster"}, ownMarkers: true},
	{pkg: hypershiftPkg, gk: schema.GroupKind{Group: "hypershift.openshift.io", Kind: "NodePool"}, ownMarkers: true},
}

func main() {
	out := flag.String("out", "", "directory to write the CRDs into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "crdgen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	if out == "" {
		return fmt.Errorf("-out is required")
	}
	pkgPaths := map[string]bool{}
	for _, k := range kinds {
		pkgPaths[k.pkg] = true
	}
	var roots []string
	for p := range pkgPaths {
		roots = append(roots, p)
	}
	pkgs, err := loader.LoadRoots(roots...)
	if err != nil {
		return fmt.Errorf("loading %v: %w", roots, err)
	}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return fmt.Errorf("loading %s: %v", p.PkgPath, p.Errors)
		}
	}
	reg := &markers.Registry{}
	if err := crdmarkers.Register(reg); err != nil {
		return err
	}
	parser := &crd.Parser{
		Collector: &markers.Collector{Registry: reg},
		Checker:   &loader.TypeChecker{NodeFilters: []loader.NodeFilter{crd.Generator{}.CheckFilter()}},
	}
	crd.AddKnownTypes(parser)
	for _, p := range pkgs {
		parser.NeedPackage(p)
	}
	for _, k := range kinds {
		parser.NeedCRDFor(k.gk, nil)
		if err := loadErrors(pkgs); err != nil {
			return err
		}
		c, ok := parser.CustomResourceDefinitions[k.gk]
		if !ok {
			return fmt.Errorf("no CRD generated for %s", k.gk)
		}
		crd.FixTopLevelMetadata(c)
		c.APIVersion, c.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		if k.ownMarkers {
			if err := write(out, k.pkg, &c); err != nil {
				return err
			}
			continue
		}
		c.Spec.Names.ShortNames = k.shortNames
		c.Spec.Names.Categories = []string{"all", "kubevirt"}
		switch k.gk.Group {
		case "cdi.kubevirt.io", "migrations.kubevirt.io":
			c.Spec.Names.Categories = []string{"all"}
		case "template.openshift.io", "instancetype.kubevirt.io", "k8s.cni.cncf.io":
			c.Spec.Names.Categories = nil
		}
		if k.plural != "" {
			c.Spec.Names.Plural, c.Spec.Names.Singular = k.plural, k.singular
			c.Name = k.plural + "." + k.gk.Group
		}
		if k.cluster {
			c.Spec.Scope = apiextensionsv1.ClusterScoped
		}
		for i := range c.Spec.Versions {
			v := &c.Spec.Versions[i]
			v.AdditionalPrinterColumns = k.columns
			for _, path := range k.optional {
				if err := optional(v.Schema.OpenAPIV3Schema, path); err != nil {
					return fmt.Errorf("%s: %w", k.gk, err)
				}
			}
			if k.status {
				v.Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}}
			}
		}
		if err := write(out, k.pkg, &c); err != nil {
			return err
		}
	}
	return nil
}

// optional drops the dotted path (a field under s) from its parent's
// required fields.
func optional(s *apiextensionsv1.JSONSchemaProps, path string) error {
	first, rest, nested := strings.Cut(path, ".")
	child, ok := s.Properties[first]
	if !ok {
		return fmt.Errorf("optional: no field %s", first)
	}
	if nested {
		if err := optional(&child, rest); err != nil {
			return fmt.Errorf("%s.%w", first, err)
		}
		s.Properties[first] = child
		return nil
	}
	s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == first })
	if len(s.Required) == 0 {
		s.Required = nil
	}
	return nil
}

// write puts c into out as GROUP_PLURAL.yaml.
func write(out, pkg string, c *apiextensionsv1.CustomResourceDefinition) error {
	data, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	name := filepath.Join(out, fmt.Sprintf("%s_%s.yaml", c.Spec.Group, c.Spec.Names.Plural))
	header := "# Generated by e2e/tools/crdgen from " + pkg + "; do not edit.\n"
	return os.WriteFile(name, append([]byte(header), data...), 0o644)
}

// loadErrors returns the errors of the schema parse. The loader reads only
// the imports that type declarations use, so declarations of variables in
// the same packages (register.go's scheme setup) report their imports as
// undefined; those say nothing about the schemas and are skipped.
func loadErrors(pkgs []*loader.Package) error {
	var errs []error
	for _, p := range pkgs {
		for _, e := range p.Errors {
			if strings.Contains(e.Error(), "undefined: ") {
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", p.PkgPath, e))
		}
	}
	return errors.Join(errs...)
}
