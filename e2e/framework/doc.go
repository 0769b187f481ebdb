// Package framework is the e2e test harness: it connects to the running
// local cluster (`tekvirt up`), creates test namespaces, and runs TaskRuns
// and PipelineRuns with chained expectations whose failures print the run's
// status and its pod's logs.
package framework
