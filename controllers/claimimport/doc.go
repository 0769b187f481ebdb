// Package claimimport imports into a PersistentVolumeClaim annotated as
// CDI's older, DataVolume-less path asks: cdi.kubevirt.io/storage.import.endpoint
// (with ...import.source, ...import.secretName, ...import.certConfigMap and
// cdi.kubevirt.io/storage.contentType). The reconciler runs the catalog's
// import-disk task into the claim - the same run a DataVolume of that
// source gets, owned by the claim - and reports it in the annotations CDI
// writes: cdi.kubevirt.io/storage.pod.phase, ...import.importPodName,
// ...pod.restarts and the Running condition's
// cdi.kubevirt.io/storage.condition.running (with .reason and .message).
// A claim whose import succeeded is left alone; a source tekvirt cannot
// import is reported as a failed import naming the annotation.
package claimimport
