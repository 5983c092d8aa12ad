// Package ocicni benchmarks pkg/ocicni, the engine, through its exported
// API only: a pod's setup and teardown through the manager against raw
// libcni on the same configs and plugins (BenchmarkPodVsLibcni,
// BenchmarkThroughput), a teardown whose middle DEL fails
// (BenchmarkTeardownFailingMiddle), and the manager's own cost with a fake
// executor (BenchmarkPodOverhead, BenchmarkFullNode). The benchmarks that
// need the engine's unexported names (plugin exec, config reloads, GC)
// stay in pkg/ocicni. BENCHMARKS.md reports the figures; .ci/bench runs
// them.
package ocicni
