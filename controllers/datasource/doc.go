// Package datasource reconciles CDI DataSources: it resolves the source (a
// PVC, or another DataSource naming one) into status.source and reports
// Ready once the PVC exists and the DataVolume filling it, if any, has
// succeeded. DataVolumes refer to DataSources by spec.sourceRef and clone
// their PVC; DataImportCrons keep their managed DataSource pointing at the
// newest import.
package datasource
