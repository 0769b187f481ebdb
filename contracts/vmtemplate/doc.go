// Package vmtemplate names the labels and annotations through which a VM
// and the OpenShift Template it was made from refer to each other, as
// KubeVirt's SSP writes them: the template tasks set them, the VM
// webhook's template validator reads them.
package vmtemplate
