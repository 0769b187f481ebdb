// Package bench holds tekvirt's measurements against the running cluster.
// Each compares our work with a baseline run in the same process and prints
// the ratio, since the machines are too noisy for absolute timings. They run
// only with TEKVIRT_BENCH=1 (make bench).
package bench
