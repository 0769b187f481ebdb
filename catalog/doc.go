// Package catalog is tekvirt's published set of Tekton tasks and pipelines:
// it reads the hand-written manifests embedded from tasks/ (and pipelines/),
// resolves their ko://<import path> image names to built images, and yields
// the objects the controller installs into a namespace: each Task with the
// ServiceAccount named by its task.kubevirt.io/associatedServiceAccount
// annotation and a RoleBinding to the task's ClusterRole. Render writes the
// same as a catalog in the tektoncd/catalog layout with Artifact Hub's
// metadata, each file applicable into any namespace, and PushBundles pushes
// each task and pipeline as a Tekton bundle.
package catalog
